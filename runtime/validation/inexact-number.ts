// Finds number literals in JSON text that JSON.parse does not keep as written. Stored values that
// were parsed must refuse such numbers rather than change them.
// - inexactNumberIn: a whole number beyond ±(2^53 − 1) written in digits, which comes back as a
//   neighbour (12345678901234567890 reads 12345678901234567000), one spelled with a fraction or an
//   exponent whose double does not print back as written at its own precision (9007199254740993.0,
//   12345678901234567e1), or one so large it becomes Infinity (and then null); fractions are doubles
//   by nature and pass, and so does a large one that prints back (1e300, 9.9999999999999992e+22 as
//   C's %.17g prints 1e23) (an action's output, which a guest may print with more digits than a
//   double holds).
// - changedNumberIn: any literal whose double prints as another decimal (1e-400 reads 0,
//   9007199254740993.0 reads 9007199254740992): for text a person wrote to be kept as written
//   (an event type's schema), where 1e300 passes and an over-precise fraction does not.

const NUMBER_CHAR = /[-+0-9.eE]/;

/** The first number literal outside strings in valid JSON `text` for which `refuse` holds, or undefined. */
function findNumber(text: string, refuse: (literal: string) => boolean): string | undefined {
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i]!;
    if (c === '"') {
      for (i += 1; i < text.length && text[i] !== '"'; i += 1) if (text[i] === '\\') i += 1;
      continue;
    }
    if (c !== '-' && (c < '0' || c > '9')) continue;
    let end = i + 1;
    while (end < text.length && NUMBER_CHAR.test(text[end]!)) end += 1;
    const literal = text.slice(i, end);
    if (refuse(literal)) return literal;
    i = end - 1;
  }
  return undefined;
}

const isInexact = (literal: string): boolean => {
  const value = Number(literal);
  if (!Number.isFinite(value)) return true;
  if (/^-?\d+$/.test(literal)) return !Number.isSafeInteger(value);
  if (Math.abs(value) <= Number.MAX_SAFE_INTEGER) return false;
  const canonical = canonicalDecimal(literal);
  return isWhole(canonical) && !printedAsParsed(canonical, value);
};

/**
 * Whether `value`, the double read from a literal (`canonical`, as canonicalDecimal writes it),
 * prints back as the literal at the literal's own count of significant digits: C's `%.17g` prints
 * 1e23 as 9.9999999999999992e+22, which reads back as that very double, while 9007199254740993.0
 * reads as 9007199254740992.
 */
function printedAsParsed(canonical: string, value: number): boolean {
  const digits = /^-?(\d+)/.exec(canonical)![1]!.length;
  return digits <= 100 && canonical === canonicalDecimal(value.toPrecision(digits));
}

/** A JSON number literal as `<sign><digits>e<exponent>` with no leading or trailing zeros in its digits ("0" for zero). */
function canonicalDecimal(literal: string): string {
  const parts = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  if (parts === null) return literal; // Infinity, NaN: never a JSON number's parse of a finite literal
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = parts;
  const all = `${whole}${fraction}`.replace(/^0+/, '');
  const digits = all.replace(/0+$/, '');
  if (digits === '') return '0';
  // The exponent as a BigInt: a literal may carry one past what a double's exponent holds.
  const scale = BigInt(exponent) - BigInt(fraction.length) + BigInt(all.length - digits.length);
  return `${sign}${digits}e${scale}`;
}

const changesWhenParsed = (literal: string): boolean => canonicalDecimal(literal) !== canonicalDecimal(String(Number(literal)));

/** Whether a literal (`canonical`, as canonicalDecimal writes it) is a whole number, however it was spelled (`12e3`, `5.0`). */
const isWhole = (canonical: string): boolean => !/e-/.test(canonical);

/** The first whole number past ±(2^53 − 1) that JSON.parse would change (any spelling; in digits, any), or number too large for a double, outside strings in valid JSON `text`; else undefined. */
export const inexactNumberIn = (text: string): string | undefined => findNumber(text, isInexact);

/** The first number outside strings in valid JSON `text` that JSON.parse reads as another value (then printed otherwise); else undefined. */
export const changedNumberIn = (text: string): string | undefined => findNumber(text, changesWhenParsed);
