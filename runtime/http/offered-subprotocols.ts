// The subprotocols a WebSocket upgrade offers, from every Sec-WebSocket-Protocol line: the lines of
// a list header make one list, in order (RFC 9110 §5.3), and a client or a proxy may split it, so
// reading only the first line would miss a token sent on the second.

import type { HttpRequest } from 'uWebSockets.js';

export function offeredSubprotocols(req: HttpRequest): string[] {
  const offered: string[] = [];
  req.forEach((name, value) => {
    if (name !== 'sec-websocket-protocol') return;
    for (const entry of value.split(',')) {
      const trimmed = entry.trim();
      if (trimmed !== '') offered.push(trimmed);
    }
  });
  return offered;
}
