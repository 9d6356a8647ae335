// How text the caller made up (an unknown field, a header, a key; a guest's member names) is echoed
// in an error: cut to a bound, so an error stays small whatever the request held, and never inside a
// surrogate pair (half an emoji is not Unicode, which strict JSON parsers and the ledger refuse).

export const SHOWN_NAME_CHARS = 64;

/** `text` cut to at most `max` UTF-16 units, without splitting a surrogate pair. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

export const shownName = (name: string): string => cutText(name, SHOWN_NAME_CHARS);
