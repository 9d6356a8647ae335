// An amortised sweep of a map whose stale entries are let go only as it grows: once it holds a mark
// (1,024 at first), the stale ones are removed and the next mark is twice what is left. A steady
// map is never walked; a growing one is walked about once per doubling. Connect pauses and resumed
// write retries use one each, their staleness their own.

/** Entries a map holds before its first sweep. */
export const FIRST_SWEEP_AT = 1024;

/** Answers a function that sweeps `map` of the entries `stale` names, when it has grown to its mark. */
export function growthSweep<K, V>(map: Map<K, V>): (stale: (value: V) => boolean) => void {
  let sweepAt = FIRST_SWEEP_AT;
  return (stale) => {
    if (map.size < sweepAt) return;
    for (const [key, value] of map) if (stale(value)) map.delete(key);
    sweepAt = Math.max(FIRST_SWEEP_AT, 2 * map.size);
  };
}
