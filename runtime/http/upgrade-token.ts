// The credential of a WebSocket upgrade (live rooms, device sockets): `?token=`, or an entry of
// Sec-WebSocket-Protocol next to the endpoint's own subprotocol (a browser cannot set other
// headers). Given both ways, the two must agree, and the subprotocols may hold one besides the
// endpoint's own: a client sending two different ones has a bug, and answering for one of them
// would hide it.

import { InputError } from '../errors.ts';

/** The token of an upgrade, or undefined; an empty `?token=` (a template left unfilled) is none. */
export function upgradeToken(queryToken: string | null, offered: readonly string[], protocol: string): string | undefined {
  const fromQuery = queryToken === null || queryToken === '' ? undefined : queryToken;
  const tokens = new Set(offered.filter((entry) => entry !== protocol));
  if (tokens.size > 1) {
    throw new InputError(400, 'conflicting_tokens', `Sec-WebSocket-Protocol offers ${tokens.size} different entries besides ${protocol}; give the token once, as the only other entry.`);
  }
  const fromProtocol = tokens.values().next().value;
  if (fromQuery !== undefined && fromProtocol !== undefined && fromQuery !== fromProtocol) {
    throw new InputError(400, 'conflicting_tokens', 'The token is given twice, in ?token= and in Sec-WebSocket-Protocol, with different values; give it once.');
  }
  return fromQuery ?? fromProtocol;
}
