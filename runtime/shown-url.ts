// A URL as the CLI prints it: without a password (a socket URL may carry one, sent as Basic auth
// to a proxy in front of Sluice) or a query (where a token could be), each said by `***`. The
// commands that print the URL they were given (device, watch, and the REST commands refusing one)
// show it so. A password is masked in text that is no URL too: `admin:s3cret@host` (no scheme)
// parses as a URL of scheme `admin:`, and `//admin:s3cret@host` not at all.

/**
 * `user:password@` at the start of an authority (after `scheme://` or `//`, or at the start of text
 * without them): the user up to the first `:`, the password up to the last `@` before the path (as
 * WHATWG URLs read `u:p@ss@host`).
 */
const USERINFO = /^((?:[a-z][a-z0-9+.-]*:)?\/\/|)([^/?#@:]*):([^/?#]*)@/i;

/** `url` with its password and query masked; text that has neither is returned as given (trimmed). */
export function shownUrl(url: string): string {
  const masked = url.trim().replace(USERINFO, (_whole, start: string, user: string) => `${start}${user}:***@`);
  if (!URL.canParse(masked)) return masked;
  const { protocol, username, password, host, pathname, search } = new URL(masked);
  if (password === '' && search === '') return masked;
  const user = username === '' && password === '' ? '' : `${username}${password === '' ? '' : ':***'}@`;
  return `${protocol}//${user}${host}${pathname}${search === '' ? '' : '?***'}`;
}
