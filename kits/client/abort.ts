// Cancellation for the REST client: one signal that follows several (the client's, the call's and
// an attempt's timeout), and a race that ends a wait at once when a signal aborts, even a wait on
// an injected fetch or sleep that does not listen to signals itself.

/** A signal that aborts, with the same reason, as soon as any of `signals` does (or `abort` is called). */
export interface LinkedSignal {
  readonly signal: AbortSignal;
  readonly abort: (reason: unknown) => void;
  /** Stops following the signals (call it once the work is over, so nothing keeps a listener). */
  readonly release: () => void;
}

export function linkSignals(signals: readonly (AbortSignal | undefined)[]): LinkedSignal {
  const controller = new AbortController();
  const followed = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  const listeners = followed.map((signal) => {
    const listener = (): void => controller.abort(signal.reason);
    signal.addEventListener('abort', listener, { once: true });
    return () => signal.removeEventListener('abort', listener);
  });
  const already = followed.find((signal) => signal.aborted);
  if (already !== undefined) controller.abort(already.reason);
  return {
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
    release: () => listeners.forEach((remove) => remove()),
  };
}

/**
 * Settles as `work` does, or rejects with the signal's reason as soon as it aborts; `work` is then
 * left to finish unheard (its rejection is handled here, so it never goes unhandled).
 */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason);
  let listener = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    listener = () => reject(signal.reason);
    signal.addEventListener('abort', listener, { once: true });
  });
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener('abort', listener));
}
