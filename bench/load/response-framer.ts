// Finds complete HTTP/1.1 responses in a socket's byte stream and reports each status code:
// just enough HTTP for a load generator (Content-Length, chunked, bodiless statuses), nothing more.

const HEAD_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CHUNKED = /\r\ntransfer-encoding:[^\r]*chunked/i;

/** Returns a feed function; `onResponse` runs once per complete final (non-1xx) response, in order. */
export function createResponseFramer(onResponse: (status: number) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      const frame = frameOne(pending);
      if (frame === undefined) return;
      pending = pending.subarray(frame.length);
      if (frame.status >= 200) onResponse(frame.status);
    }
  };
}

interface Frame {
  readonly status: number;
  readonly length: number;
}

function frameOne(bytes: Buffer): Frame | undefined {
  const headEnd = bytes.indexOf(HEAD_END);
  if (headEnd === -1) return undefined;
  const head = bytes.toString('latin1', 0, headEnd);
  const status = Number(head.slice(9, 12));
  if (!head.startsWith('HTTP/1.') || !Number.isInteger(status)) {
    throw new Error(`not an HTTP/1.x response: ${JSON.stringify(head.slice(0, 40))}`);
  }
  const bodyStart = headEnd + HEAD_END.length;
  if (status < 200 || status === 204 || status === 304) return { status, length: bodyStart };
  const declared = CONTENT_LENGTH.exec(head)?.[1];
  if (declared !== undefined) {
    const end = bodyStart + Number(declared);
    return end <= bytes.length ? { status, length: end } : undefined;
  }
  if (CHUNKED.test(head)) {
    const end = chunkedEnd(bytes, bodyStart);
    return end === undefined ? undefined : { status, length: end };
  }
  // No length and not chunked: the body runs to connection close; our servers never answer like that.
  return { status, length: bodyStart };
}

/** Offset just past the last chunk and its (empty) trailer, or undefined when incomplete. */
function chunkedEnd(bytes: Buffer, from: number): number | undefined {
  let at = from;
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at, 'latin1');
    if (lineEnd === -1) return undefined;
    const size = Number.parseInt(bytes.toString('latin1', at, lineEnd), 16);
    if (Number.isNaN(size)) throw new Error('malformed chunk size in response');
    if (size === 0) {
      const trailerEnd = bytes.indexOf('\r\n', lineEnd + 2, 'latin1');
      return trailerEnd === -1 ? undefined : trailerEnd + 2;
    }
    at = lineEnd + 2 + size + 2;
    if (at > bytes.length) return undefined;
  }
}
