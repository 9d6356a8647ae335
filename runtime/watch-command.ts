// `sluice watch`: prints a live room's run updates as JSON lines, through the TypeScript client's
// watchRuns (it resumes after a drop, so each update is printed once). Ctrl-C stops it; the
// position printed on exit can be passed back as --after-seq. Stdout carries JSON lines only; why a
// connection dropped, or why watching ended for good, goes to stderr.

import { parseCommandArgs } from './cli-parse-args.ts';
import type { Writable } from 'node:stream';
import { LiveClosedError, SluiceArgumentError, watchRuns } from '../kits/client/index.ts';
import { API_TARGET_OPTIONS, apiTargetOf } from './cli-api-target.ts';
import { nothingAnsweredAt } from './cli-client-call.ts';
import { wholeNumberOfDigits } from './decimal-digits.ts';
import { InputError } from './errors.ts';
import { EXIT_USAGE } from './cli-exit-codes.ts';
import { AFTER_SEQ_DIGITS } from './rooms/live-subscription.ts';
import { shownUrl } from './shown-url.ts';
import { printable, printableJson } from './terminal-text.ts';

const USAGE = 'usage: sluice watch <http://host:port> --org <org id> [--key <API key>, or SLUICE_API_KEY] [--environment production|sandbox] [--run <run id>] [--after-seq <n>]';

export interface WatchCommandIo {
  readonly stdout: Writable;
  /** Hears each dropped or refused connection before it reconnects, and why watching ended (stdout stays JSON lines only). */
  readonly stderr: Writable;
  /** Aborting it stops watching (the CLI aborts on SIGINT/SIGTERM). */
  readonly signal: AbortSignal;
  /** Where SLUICE_API_KEY is read when --key is not given. */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * Watches until `signal` aborts (exit 0) or the room ends the subscription for good (exit 1), as
 * does a first connection that nothing answers.
 */
export async function watchCommand(args: readonly string[], io: WatchCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { ...API_TARGET_OPTIONS, run: { type: 'string' }, 'after-seq': { type: 'string' } },
  });
  const { url, org, apiKey, environment } = apiTargetOf(values, positionals, io.env ?? {}, USAGE);
  // An empty run id would subscribe to every run of the org (an unset `--run "$RUN"`).
  if (values.run === '') throw new InputError(400, 'usage', `--run is empty. ${USAGE}`);
  const afterSeq = values['after-seq'] === undefined ? undefined : wholeNumberOfDigits(values['after-seq'], AFTER_SEQ_DIGITS);
  if (afterSeq !== undefined && Number.isNaN(afterSeq)) throw new InputError(400, 'usage', `--after-seq is a whole number of at most ${AFTER_SEQ_DIGITS} digits. ${USAGE}`);
  const print = (line: string): void => void io.stdout.write(`${line}\n`);
  let live: ReturnType<typeof watchRuns>;
  /** Why watching was given up before anything answered at the url. */
  let unreachable: string | undefined;
  /**
   * Something answered at the url: a refusal or a close (a socket that opened ends closed, so frames
   * need no flag of their own; not `--after-seq`'s position, which is there before any).
   */
  let answered = false;
  try {
    live = watchRuns({
      url, apiKey, org, environment,
      ...(values.run === undefined ? {} : { runId: values.run }),
      ...(afterSeq === undefined ? {} : { afterSeq }),
      // An update's error is an action's or a receiver's text: escaped as printable() does, still JSON.
      // Empty fields left out, as the frame leaves them out: `"error":""` on every update read as one.
      onUpdate: (update) => print(printableJson(JSON.stringify(update, (_key, value: unknown) => (value === '' ? undefined : value)))),
      onReload: (reason) => print(printableJson(JSON.stringify({ reload: reason }))),
      onDisconnect: (why, how) => {
        // Nothing has ever answered (Sluice not started, a typo'd port): ended, as the REST commands
        // end, not retried for ever. Once anything answered (a socket, a 503 while Sluice restarts),
        // a drop is retried.
        if (how !== 'unreachable') answered = true;
        if (how === 'unreachable' && !answered) {
          unreachable = why;
          live.close();
          return;
        }
        io.stderr.write(`sluice watch: ${printable(why)}; reconnecting\n`);
      },
    });
  } catch (error) {
    // An argument the client would not send (an org id of "."), said as the REST commands say it.
    if (!(error instanceof SluiceArgumentError)) throw error;
    io.stderr.write(`sluice watch: ${printable(`${error.code}: ${error.message}`)}\n`);
    return EXIT_USAGE;
  }
  const stop = (): void => live.close();
  io.signal.addEventListener('abort', stop, { once: true });
  try {
    await live.done;
    if (unreachable !== undefined) {
      io.stderr.write(`sluice watch: ${printable(unreachable)}. ${nothingAnsweredAt(shownUrl(url))}\n`);
      return 1;
    }
    // Without a position (no frame came), there is nothing to pass back: the line says stopped alone.
    print(JSON.stringify(live.position === undefined ? { stopped: true } : { stopped: true, after_seq: live.position }));
    return 0;
  } catch (error) {
    // A refusing server's body is part of the message: whatever answered, it never drives the terminal.
    io.stderr.write(`sluice watch: ended: ${printable(error instanceof LiveClosedError ? error.message : String(error))}\n`);
    return 1;
  } finally {
    io.signal.removeEventListener('abort', stop);
  }
}
