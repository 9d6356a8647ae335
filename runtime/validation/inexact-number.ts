// Finds a number in JSON text that JSON.parse cannot keep: a whole number beyond ±(2^53 − 1), which
// comes back as a neighbour (12345678901234567890 reads 12345678901234567000), or one so large it
// becomes Infinity (and then null). Stored values that were parsed must refuse such numbers rather
// than change them; fractions are doubles by nature and pass.

const NUMBER_CHAR = /[-+0-9.eE]/;

/** The first such number literal outside strings in valid JSON `text`, or undefined. */
export function inexactNumberIn(text: string): string | undefined {
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
    const value = Number(literal);
    if (!Number.isFinite(value) || (/^-?\d+$/.test(literal) && !Number.isSafeInteger(value))) return literal;
    i = end - 1;
  }
  return undefined;
}
