// How a name the caller made up (an unknown field, a header, a key) is echoed in an error: cut to a
// bound, so an error stays small whatever the request held.

export const SHOWN_NAME_CHARS = 64;

export const shownName = (name: string): string => name.slice(0, SHOWN_NAME_CHARS);
