// The answer to a WebSocket upgrade that is refused: the error's status and JSON body, with
// Retry-After when the error says when to try again (a quota, a full server, a start in progress).

import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import { retryAfterHeader, type SluiceError } from '../errors.ts';
import { WEBSOCKET_VERSION } from './upgrade-required.ts';

export function refuseUpgrade(res: HttpResponse, refusal: SluiceError): void {
  res.writeStatus(`${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}`).writeHeader('content-type', 'application/json');
  const retryAfter = retryAfterHeader(refusal);
  if (retryAfter !== undefined) res.writeHeader('retry-after', retryAfter);
  // A 426 says which version to speak (RFC 6455 asks it of a version refused; a plain GET is told too).
  if (refusal.status === 426) res.writeHeader('sec-websocket-version', WEBSOCKET_VERSION);
  res.end(JSON.stringify(refusal.toBody()));
}
