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

export function printable(text: string): string {
  return text.replace(ESCAPED, (char) => {
    const code = char.codePointAt(0) as number;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** Lines for the terminal, each made printable, as one text. */
export const printableLines = (lines: readonly string[]): string => lines.map(printable).join('\n');
