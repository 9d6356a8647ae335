// Where each request and socket of the client goes: a path under the base URL the program gave,
// keeping that URL's own path (Sluice behind a proxy at http://host/sluice/), with or without its
// trailing slash. `new URL('/x', base)` would drop that path and send everything to the wrong place.

/** The base URL a program gave, checked once: http(s) or ws(s), no query or fragment (they would be lost). */
export function parseBaseUrl(url: string): URL {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new TypeError('The Sluice url is not a URL: give where Sluice listens, such as http://127.0.0.1:8787.');
  }
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(base.protocol)) throw new TypeError(`The Sluice url must start with http://, https://, ws:// or wss:// (got ${base.protocol}).`);
  if (base.search !== '' || base.hash !== '') throw new TypeError('The Sluice url is where Sluice listens (scheme, host, port and an optional path): it takes no query or fragment.');
  return base;
}

/**
 * `path` (a leading slash added when missing; it may carry a query) under the base URL's path,
 * over http(s) or, for a socket, ws(s).
 */
export function urlUnder(base: URL, path: string, scheme: 'http' | 'ws'): URL {
  const prefix = base.pathname.replace(/\/+$/, '');
  // One leading slash: `//x` would be read as a host.
  const url = new URL(`${prefix}/${path.replace(/^\/+/, '')}`, base);
  const secure = url.protocol === 'https:' || url.protocol === 'wss:';
  url.protocol = scheme === 'ws' ? (secure ? 'wss:' : 'ws:') : secure ? 'https:' : 'http:';
  return url;
}

/**
 * Refuses a base URL holding a user name or password, for REST calls: fetch refuses such URLs, and
 * says so with the URL, password and all, in its message. (A socket sends them as Basic auth to a
 * proxy in front of Sluice, so they stay allowed there.) The message never quotes them.
 */
export function refuseUrlCredentials(base: URL): void {
  if (base.username !== '' || base.password !== '') throw new TypeError('The Sluice url holds a user name or password, which REST calls cannot send: leave them out (the API key authenticates every call).');
}
