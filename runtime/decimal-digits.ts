// A whole number typed by a person (a flag, an environment variable): decimal digits only, so a
// sign, a hex prefix, an exponent, spaces or a fraction are never read as a number by accident.

/** The number `text` spells in at most `maxDigits` decimal digits, else NaN (callers range-check it). */
export function wholeNumberOfDigits(text: string, maxDigits = 16): number {
  return text.length > 0 && text.length <= maxDigits && /^\d+$/.test(text) ? Number(text) : Number.NaN;
}
