// How the client waits between attempts: exponential backoff with jitter, capped, or the server's
// own Retry-After when it gave one. `sleep` is injectable so tests drive time instead of waiting.

/** Waits `ms`; an abort of `signal` ends the wait at once (and its timer, which would keep a program alive). */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export const realSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted === true) return resolve();
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve();
    };
    // A loop passes one signal to every wait: each wait takes its listener off again when it ends.
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/**
 * The longest server hint (Retry-After) waited out: a REST call given a longer one throws its answer,
 * a reconnect waits this long. A Node timer past 2^31 - 1 ms would fire at once, and an hour's wait
 * asked by a proxy's maintenance page should not pass unseen.
 */
export const MAX_RETRY_AFTER_MS = 300_000;

/** First wait, and the cap the waits double up to. */
const FIRST_WAIT_MS = 250;
const MAX_WAIT_MS = 30_000;

/**
 * The wait before attempt `attempt + 1` (attempt counts from 0): the server's hint when given,
 * else 250 ms doubling to 30 s, each drawn from its upper half so that many clients cut off at
 * once (a restart) do not all come back in the same instant.
 */
export function backoffMs(attempt: number, hintMs?: number, random: () => number = Math.random): number {
  if (hintMs !== undefined && hintMs >= 0) return hintMs;
  const ceiling = Math.min(MAX_WAIT_MS, FIRST_WAIT_MS * 2 ** attempt);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** A `Retry-After` of delta-seconds (what Sluice sends) in ms; undefined for none, 0, or an HTTP-date. */
export function retryAfterMsOf(header: string | null | undefined): number | undefined {
  const seconds = Number(header ?? '');
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined;
}

/**
 * Answers that pass, worth another attempt as sent: 429 (a quota, an org at its cap of live sockets
 * until one closes, a device's paused connects), 503 (Sluice starting, stopping or busy), and 502
 * and 504 (a proxy in front while Sluice restarts). For REST calls and socket upgrades alike: a
 * refused upgrade is tried again after its Retry-After, else its backoff (reconnect-loop.ts).
 */
export const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
