// Text from elsewhere (a receiver's answer, an action's error, an event type) printed on a person's
// terminal. Shown as escapes (\u00XX, or \u{XXXXX} beyond the first plane):
// - what a terminal acts on instead of showing: C0 and C1 controls, DEL, line and paragraph
//   separators, bidirectional controls; an answer cannot retitle the window, clear the screen or
//   reorder what is printed around it;
// - what shows as nothing and has no part in visible text: zero-width space, word joiner and
//   invisible operators, byte order mark, soft hyphen, fillers, interlinear annotation marks, tag
//   characters (which can carry hidden ASCII), and lone surrogates (printed as U+FFFD otherwise).
// Kept as they are: the zero-width joiner and non-joiner and variation selectors, which shape
// visible text (emoji sequences, Persian, CJK variants), and backslashes, so an escape in the
// output may also be one that was in the text.

const ESCAPED =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\u{1d173}-\u{1d17a}\u{e0000}-\u{e007f}\ud800-\udfff]/gu;

/** `text` without the characters printable() escapes: those a terminal acts on, and those that show as nothing. */
export const withoutUnprintable = (text: string): string => text.replace(ESCAPED, '');

export function printable(text: string): string {
  return text.replace(ESCAPED, (char) => {
    const code = char.codePointAt(0) as number;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * A JSON text (JSON.stringify's, or a frame Sluice sent) for the terminal: the characters
 * `printable` escapes, written as JSON's own `\uXXXX` escapes (each UTF-16 unit of one beyond the
 * first plane), so it parses to the same value. JSON.stringify escapes C0 controls but not C1,
 * bidirectional controls or line separators.
 */
export function printableJson(json: string): string {
  return json.replace(ESCAPED, (char) => [...Array(char.length).keys()].map((i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''));
}

/** Lines for the terminal, each made printable, as one text. */
export const printableLines = (lines: readonly string[]): string => lines.map(printable).join('\n');
