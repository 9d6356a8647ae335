// A Map kept to a number of entries, the least recently set dropped first: caches and memories of
// what was last seen (parsed cron patterns, each org's page sizes) that must not grow with every
// key ever met. A Map iterates in insertion order, so its first key is the one set longest ago.

/** Sets `key` to `value` as `map`'s newest entry, first dropping its oldest when it holds `max` other keys. */
export function setNewest<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
}
