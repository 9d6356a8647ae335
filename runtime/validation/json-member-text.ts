// The exact text of one member of a JSON object, cut from the document it was parsed from: an API
// body's `payload` keeps the numbers its sender wrote (raw-json.ts says why that matters).

const isWhitespace = (char: string | undefined): boolean => char === ' ' || char === '\t' || char === '\n' || char === '\r';

function skipWhitespace(text: string, at: number): number {
  let i = at;
  while (isWhitespace(text[i])) i++;
  return i;
}

/** The index just past the JSON string that opens (with its quote) at `at`. */
export function endOfString(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x5c) i++; // a backslash escapes the next character
    else if (code === 0x22) return i + 1;
  }
  return text.length;
}

/** The index just past the value that starts at `at`. */
function endOfValue(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return endOfString(text, at);
  if (first === '{' || first === '[') {
    let depth = 0;
    for (let i = at; i < text.length; i++) {
      const char = text[i];
      if (char === '"') i = endOfString(text, i) - 1;
      else if (char === '{' || char === '[') depth++;
      else if ((char === '}' || char === ']') && --depth === 0) return i + 1;
    }
    return text.length;
  }
  let i = at;
  while (i < text.length && !isWhitespace(text[i]) && text[i] !== ',' && text[i] !== '}' && text[i] !== ']') i++;
  return i;
}

/** One member of a JSON object as written: its name's text (quotes and escapes kept), the name, and its value's text. */
export interface MemberText {
  readonly nameText: string;
  readonly name: string;
  readonly valueText: string;
}

/**
 * The members of the JSON object `text` in the order written, each as its exact text, or undefined
 * when `text` is not an object. `text` must already have passed JSON.parse.
 */
export function membersText(text: string): MemberText[] | undefined {
  let i = skipWhitespace(text, 0);
  if (text[i] !== '{') return undefined;
  const members: MemberText[] = [];
  i = skipWhitespace(text, i + 1);
  while (i < text.length && text[i] !== '}') {
    const nameEnd = endOfString(text, i);
    const nameText = text.slice(i, nameEnd);
    const valueStart = skipWhitespace(text, skipWhitespace(text, nameEnd) + 1);
    const valueEnd = endOfValue(text, valueStart);
    members.push({ nameText, name: JSON.parse(nameText) as string, valueText: text.slice(valueStart, valueEnd) });
    i = skipWhitespace(text, valueEnd);
    if (text[i] === ',') i = skipWhitespace(text, i + 1);
  }
  return members;
}

/**
 * The text of the value of `name` in the JSON object `text`, or undefined when it has none (or is
 * not an object). `text` must already have passed JSON.parse. A repeated name gives its last
 * value, as JSON.parse keeps.
 */
export function memberText(text: string, name: string): string | undefined {
  return membersText(text)?.findLast((member) => member.name === name)?.valueText;
}
