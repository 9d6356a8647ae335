// Text from elsewhere (a receiver's answer, an action's error, an event type) printed on a person's
// terminal: every character that a terminal acts on instead of showing (C0 and C1 controls, DEL,
// line and paragraph separators, bidirectional overrides) is shown as a \u escape, so an answer
// cannot retitle the window, clear the screen or reorder what is printed around it.

const ACTS_ON = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(ACTS_ON, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
