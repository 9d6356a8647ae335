// ISO-8601 durations for delay steps (`PT5M`, `P1DT2H`, `P2W`, `PT1.5S`) turned into milliseconds.
// Only fixed-length units: years and months have no fixed length, so they are refused, not guessed.

/** The longest delay a step may ask for (DESIGN: durable timers; 30 days keeps runs bounded). */
export const MAX_DELAY_MS = 30 * 24 * 3_600_000;

export type DurationResult = { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly reason: string };

const UNIT_MS = { W: 604_800_000, D: 86_400_000, H: 3_600_000, M: 60_000, S: 1000 } as const;

// P [nW] [nD] [T [nH] [nM] [n[.fff]S]] — weeks may combine with days (ISO 8601-2 allows it).
const SHAPE = /^P(?:(\d{1,6})W)?(?:(\d{1,6})D)?(?:T(?:(\d{1,7})H)?(?:(\d{1,9})M)?(?:(\d{1,11})(?:[.,](\d{1,3}))?S)?)?$/;

/**
 * Parses a positive ISO-8601 duration. Returns the length in whole milliseconds, or a reason
 * fit for an API message. Does not apply the step's upper bound: see `MAX_DELAY_MS`.
 */
export function parseIsoDuration(text: string): DurationResult {
  const value = text.trim().toUpperCase();
  if (value.startsWith('-') || value.startsWith('+')) return { ok: false, reason: 'must not be signed; durations are positive' };
  const datePart = value.split('T')[0] ?? '';
  // Only for what looks like an ISO duration: "1m" (a minute, meant some other way) gets the shape message.
  if (value.startsWith('P') && /\d[YM]/.test(datePart)) {
    return { ok: false, reason: 'may not use years or months, which have no fixed length; use days (D) or weeks (W)' };
  }
  const match = SHAPE.exec(value);
  if (match === null || value === 'P' || value.endsWith('T')) {
    return { ok: false, reason: 'must be an ISO-8601 duration such as "PT5M", "PT30S" or "P1DT2H"' };
  }
  const [, w, d, h, m, s, frac] = match;
  const num = (part: string | undefined): number => (part === undefined ? 0 : Number(part));
  const fractionMs = frac === undefined ? 0 : Number(frac.padEnd(3, '0'));
  const ms = num(w) * UNIT_MS.W + num(d) * UNIT_MS.D + num(h) * UNIT_MS.H + num(m) * UNIT_MS.M + num(s) * UNIT_MS.S + fractionMs;
  if (ms <= 0) return { ok: false, reason: 'must be longer than zero' };
  return { ok: true, ms };
}
