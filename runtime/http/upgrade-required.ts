// The HTTP answer at a WebSocket endpoint's path. uWS serves the WebSocket only at the exact path;
// the HTTP router also matches it with a trailing or doubled slash. A plain GET is told what the
// endpoint is (426); a WebSocket handshake that reached the router came to a path that is not
// exact (a trailing or doubled slash), and is told the exact one (404), rather than to use a
// WebSocket client, which it is; or, at the exact path, had a key uWS refuses (not 24 characters):
// 400 naming the header. An upgrade without a handshake key is no WebSocket client: 426. And uWS
// hands an endpoint's upgrade handler every GET with a handshake key at the exact path, whatever
// its Upgrade, Connection and Sec-WebSocket-Version say: the handler asks assertWebSocketHandshake
// first, so such a GET is a 426 too instead of a socket (and a device's connection events).

import type { HttpRequest as UwsRequest } from 'uWebSockets.js';
import { InputError } from '../errors.ts';
import type { Route } from './types.ts';

/** The WebSocket protocol version this server speaks (RFC 6455), sent with a 426 (refuse-upgrade.ts). */
export const WEBSOCKET_VERSION = '13';

/** The comma-separated tokens of a header, lower-cased. */
const tokensOf = (value: string): string[] => value.toLowerCase().split(',').map((token) => token.trim());

/**
 * Throws 426 unless the request is a WebSocket handshake as RFC 6455 spells it: `Upgrade: websocket`,
 * `Connection: Upgrade` (among other tokens) and `Sec-WebSocket-Version: 13`. `plainGet` is the
 * endpoint's message for a GET that did not ask to upgrade.
 */
export function assertWebSocketHandshake(req: UwsRequest, plainGet: string): void {
  if (!tokensOf(req.getHeader('upgrade')).includes('websocket') || !tokensOf(req.getHeader('connection')).includes('upgrade')) {
    throw new InputError(426, 'upgrade_required', plainGet);
  }
  if (req.getHeader('sec-websocket-version').trim() !== WEBSOCKET_VERSION) {
    throw new InputError(426, 'unsupported_websocket_version', `This server speaks WebSocket version ${WEBSOCKET_VERSION} (RFC 6455): send Sec-WebSocket-Version: ${WEBSOCKET_VERSION}.`, { field: 'Sec-WebSocket-Version' });
  }
}

/**
 * 404 for a WebSocket handshake whose path has an empty segment (`/organizations//live`): the
 * router drops empty segments, so it would reach another route (`GET /organizations/:org`, a 401
 * about the key) rather than be told no WebSocket endpoint is there.
 */
export function refuseHandshakeWithEmptySegment(rawPath: string, headers: Readonly<Record<string, string | undefined>>): void {
  if (headers['upgrade']?.toLowerCase() !== 'websocket' || !rawPath.includes('//')) return;
  throw new InputError(404, 'not_found', 'No WebSocket endpoint at this path: open a WebSocket endpoint exactly (no doubled slash).');
}

/** The route for `pattern`: `exact` spells the path for messages, `plainGet` is the 426 message. */
export function upgradeRequiredRoute(pattern: string, exact: string, plainGet: string): Route {
  return {
    method: 'GET',
    pattern,
    // Asks for no key: the org in its path is not the caller's (a 503 for that org's load would tell it).
    namesNoTenant: true,
    handler: (request) => {
      // uWS takes every handshake with a well-formed key at the exact path: one here came to another, or had a bad key.
      // (A HEAD, answered as GET here, never upgrades, whatever its headers: told what the endpoint is.)
      if (request.method === 'GET' && request.headers['upgrade']?.toLowerCase() === 'websocket' && request.headers['sec-websocket-key'] !== undefined) {
        // (The router's path is normalized; the key tells: uWS refuses only keys not 24 characters long.)
        if (request.headers['sec-websocket-key'].trim().length === 24) throw new InputError(404, 'not_found', `No WebSocket endpoint at this path: open ${exact} exactly (no trailing or doubled slash).`);
        throw new InputError(400, 'invalid_handshake', 'The WebSocket handshake was refused: Sec-WebSocket-Key must be a base64-encoded 16-byte nonce (24 characters).', { field: 'Sec-WebSocket-Key' });
      }
      throw new InputError(426, 'upgrade_required', plainGet);
    },
  };
}
