// Durations the client hands to Node timers, checked when they are given: a timer of more than
// 2^31 - 1 ms (Infinity too), or of 0 or less, fires at once, which would end every call or
// connection as soon as it starts.

/** The longest delay a Node timer takes. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` when it is a duration a timer can wait; a RangeError naming the option otherwise. */
export function checkTimerDuration(option: string, ms: number): number {
  if (!(ms >= 1 && ms <= MAX_TIMER_MS)) throw new RangeError(`${option} is a number of milliseconds from 1 to ${MAX_TIMER_MS} (got ${ms}).`);
  return ms;
}
