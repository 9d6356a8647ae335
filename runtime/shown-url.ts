// A URL as the CLI prints it: without a password (a socket URL may carry one, sent as Basic auth
// to a proxy in front of Sluice) or a query (where a token could be), each said by `***`. The
// commands that print the URL they were given (device, watch) show it so.

/** `url` with its password and query masked; text that is no URL, or has neither, is returned as given. */
export function shownUrl(url: string): string {
  if (!URL.canParse(url)) return url;
  const { protocol, username, password, host, pathname, search } = new URL(url);
  if (password === '' && search === '') return url;
  const user = username === '' && password === '' ? '' : `${username}${password === '' ? '' : ':***'}@`;
  return `${protocol}//${user}${host}${pathname}${search === '' ? '' : '?***'}`;
}
