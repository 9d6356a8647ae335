// Ctrl-C for the CLI's long commands (watch, export): the first signal asks the command to stop
// where it can say how to go on; a second one ends the process at once, as the signal would have.
// A copy that comes within SAME_CTRL_C_MS of the first is the same Ctrl-C, not a second: `npm run`
// passes the terminal's Ctrl-C on to its child, which the terminal signalled too, so every Ctrl-C
// of `npm run sluice -- watch` came twice (on a busy machine, 3 in 10 then ended the watch without
// the position to resume from).

/** How soon after the first a signal is taken as a copy of it (npm's), not a second Ctrl-C. */
export const SAME_CTRL_C_MS = 1000;

type Listener = () => void;

export interface InterruptOptions {
  /** Where the signals are heard: default the process. */
  readonly target?: { on(signal: NodeJS.Signals, listener: Listener): unknown; off(signal: NodeJS.Signals, listener: Listener): unknown };
  /** Milliseconds, for the copy's window: default performance.now. */
  readonly now?: () => number;
  /** Ends the process by `signal` (its listeners gone): default raising it again. */
  readonly endNow?: (signal: NodeJS.Signals) => void;
}

/** Calls `stop` at the first of `signals`; a later one (not a copy) ends the process at once. */
export function onInterrupt(signals: readonly NodeJS.Signals[], stop: () => void, options: InterruptOptions = {}): void {
  const { target = process, now = () => performance.now(), endNow = (signal: NodeJS.Signals) => void process.kill(process.pid, signal) } = options;
  let firstAt: number | undefined;
  const listeners = signals.map((signal) => {
    const listener = (): void => {
      if (firstAt === undefined) {
        firstAt = now();
        stop();
        return;
      }
      if (now() - firstAt < SAME_CTRL_C_MS) return;
      for (const [index, other] of signals.entries()) target.off(other, listeners[index]!);
      endNow(signal);
    };
    target.on(signal, listener);
    return listener;
  });
}
