// Counts the client takes as options (attempts, messages held), checked when they are given: a
// NaN (an unset environment variable through Number()) compares false against every bound, so an
// unchecked one made a retry loop that never ended.

/** `n` when it is a whole number from `min` to `max`; a RangeError naming the option otherwise. */
export function checkCount(option: string, n: number, min: number, max: number): number {
  if (!(Number.isInteger(n) && n >= min && n <= max)) throw new RangeError(`${option} is a whole number from ${min} to ${max} (got ${n}).`);
  return n;
}
