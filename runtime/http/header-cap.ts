// The cap on a request's line and headers, for REST requests (server.ts) and WebSocket upgrades
// alike: uWebSockets.js reads heads far larger (60 KB upgrades were let in), so Sluice counts.

import type { HttpRequest as UwsRequest } from 'uWebSockets.js';
import { SluiceError } from '../errors.ts';

/** The request line (path and query) and the headers, counted as sent (name, value, ": " and CRLF). */
export const MAX_HEADER_BYTES = 16 * 1024;

export const headersTooLarge = (): SluiceError => new SluiceError(431, 'headers_too_large', `The request line and headers exceed ${MAX_HEADER_BYTES} bytes.`);

/** Bytes of the head of `req` as counted against MAX_HEADER_BYTES, its headers handed to `each` (name lower-cased, as uWS gives it). */
export function headBytes(req: UwsRequest, each?: (name: string, value: string) => void): number {
  let bytes = req.getUrl().length + (req.getQuery() ?? '').length;
  req.forEach((name, value) => {
    bytes += name.length + value.length + 4;
    each?.(name, value);
  });
  return bytes;
}

/** Throws the 431 when the head of an upgrade request is past the cap. */
export function assertHeadFits(req: UwsRequest): void {
  if (headBytes(req) > MAX_HEADER_BYTES) throw headersTooLarge();
}
