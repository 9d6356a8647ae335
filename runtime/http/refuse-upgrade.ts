// The answer to a WebSocket upgrade that is refused: the error's status and JSON body, with
// Retry-After when the error says when to try again (a quota, a full server, a start in progress).

import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import type { SluiceError } from '../errors.ts';

export function refuseUpgrade(res: HttpResponse, refusal: SluiceError): void {
  res.writeStatus(`${refusal.status} ${STATUS_CODES[refusal.status] ?? ''}`).writeHeader('content-type', 'application/json');
  const retryAfterMs = (refusal as { retryAfterMs?: unknown }).retryAfterMs;
  if (typeof retryAfterMs === 'number') res.writeHeader('retry-after', String(Math.max(1, Math.ceil(retryAfterMs / 1000))));
  res.end(JSON.stringify(refusal.toBody()));
}
