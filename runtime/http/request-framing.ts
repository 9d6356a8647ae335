// How a request's body is framed and coded, checked before it is read: one Content-Length (two
// different ones are request smuggling's tool), `chunked` as the only transfer coding, no content
// coding, and no body at all on a DELETE. Refused with a 400 or a 415, or a 501 for a transfer
// coding not understood; a Content-Length refused leaves where the request ends in doubt, and its
// connection is closed unanswered (server.ts says why).

import { InputError, SluiceError } from '../errors.ts';
import { shownName } from '../validation/shown-name.ts';

const SINGLE_LENGTH = /^\d{1,15}$/;

/** A DELETE with a body (a declared length above 0, or any transfer coding) is a 400, not done without it. */
export function assertNoBody(headers: Readonly<Record<string, string | undefined>>): void {
  const declared = parseContentLength(headers['content-length']);
  if ((declared !== undefined && declared > 0) || headers['transfer-encoding'] !== undefined) {
    throw new InputError(400, 'unexpected_body', 'A DELETE takes no body: send the request without one.');
  }
}

/**
 * The declared body length. Given twice (joined as "28, 3") with different values it is a 400:
 * the uWS parser frames the body by the first, and a proxy in front may frame it by the other
 * (request smuggling). Repeats of one value are that value (RFC 9112 §6.3).
 */
export function parseContentLength(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (SINGLE_LENGTH.test(value)) return Number(value);
  const values = new Set(value.split(',').map((part) => part.trim()));
  if (values.size > 1) throw new InputError(400, 'invalid_content_length', 'The Content-Length header is given more than once with different values.');
  const [only] = values;
  // An empty one the uWS parser reads as 0, and a proxy in front may read otherwise.
  if (only === undefined || !SINGLE_LENGTH.test(only)) throw new InputError(400, 'invalid_content_length', 'The Content-Length header is not a whole number of bytes.');
  return Number(only);
}

/**
 * The one transfer coding read is `chunked` (uWS reads any Transfer-Encoding as chunked and hands
 * the bytes on undecoded: a gzip one would fail its signature as if forged, and a proxy in front that
 * frames it otherwise would disagree on where the request ends). RFC 9112 §6.1: chunked not last, or
 * given twice, is a 400; a coding not understood, 501.
 */
export function assertChunkedTransfer(header: string | undefined): void {
  if (header === undefined) return;
  const codings = header.split(',').map((coding) => coding.trim().toLowerCase());
  if (codings.length === 1 && codings[0] === 'chunked') return;
  const shown = shownName(header.trim());
  if (codings.includes('chunked') && codings.at(-1) !== 'chunked') {
    throw new InputError(400, 'invalid_transfer_encoding', `Transfer-Encoding "${shown}" does not end with chunked, so the body has no framing.`, { field: 'transfer-encoding' });
  }
  // A sender never applies chunked twice (RFC 9112 §6.1): its framing is not readable as once.
  if (codings.filter((coding) => coding === 'chunked').length > 1) {
    throw new InputError(400, 'invalid_transfer_encoding', `Transfer-Encoding "${shown}" applies chunked more than once; send it once.`, { field: 'transfer-encoding' });
  }
  throw new SluiceError(501, 'unsupported_transfer_encoding', `Transfer-Encoding "${shown}" is not accepted: send the body chunked or with a Content-Length, uncompressed.`, { field: 'transfer-encoding' });
}

/**
 * Bodies are taken as sent, never decoded: a compressed one would fail its signature check (signed
 * over the plain bytes) or its JSON parse with a message that blames the wrong thing.
 */
export function assertIdentityEncoding(header: string | undefined): void {
  const coding = header?.trim().toLowerCase();
  if (coding === undefined || coding === '' || coding === 'identity') return;
  throw new InputError(415, 'unsupported_content_encoding', `Content-Encoding "${shownName(coding)}" is not accepted: send the body uncompressed (identity).`, { field: 'content-encoding' });
}
