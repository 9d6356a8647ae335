// The `updated_at` of a configuration record's next write: now, or one millisecond after the
// stamp it has when the clock has not moved past it (two writes in one millisecond, a clock set
// back). Every write of a source, device, schedule, custom action or organization so changes its `updated_at`,
// which is what versions it: schema checks ask whether a source moved on during a wait by it, and
// its ETag is made from it (if-match.ts), so no two writes of one record leave the same stamp.

/** The ISO `updated_at` for a write at `nowMs` of a record stamped `previous` (ISO). */
export function nextUpdateStamp(previous: string, nowMs: number): string {
  const previousMs = Date.parse(previous);
  return new Date(Number.isNaN(previousMs) ? nowMs : Math.max(nowMs, previousMs + 1)).toISOString();
}
