// Text from elsewhere (a receiver's answer, an action's error, an event type) printed on a person's
// terminal: every character that a terminal acts on instead of showing (C0 and C1 controls, DEL,
// line and paragraph separators, bidirectional overrides), and every one that shows as nothing
// (zero-width spaces and joiners, word joiners, the byte order mark, the soft hyphen), is shown as a
// \u escape: an answer cannot retitle the window, clear the screen, reorder what is printed around
// it, or make two different ids look the same.

const ACTS_ON_OR_INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

export function printable(text: string): string {
  return text.replace(ACTS_ON_OR_INVISIBLE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
