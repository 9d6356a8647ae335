// The load generator's HTTP response framing: one status per complete response, whatever
// the chunking of the byte stream, for Content-Length, chunked and bodiless answers.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createResponseFramer } from '../../../bench/load/response-framer.ts';

const STREAM = [
  'HTTP/1.1 204 No Content\r\nuWebSockets: 20\r\n\r\n',
  'HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"error":"dup!!"}',
  'HTTP/1.1 100 Continue\r\n\r\n',
  'HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n',
  'HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n',
].join('');
const EXPECTED = [204, 409, 401, 204];

function statusesFor(chunks: readonly Buffer[]): number[] {
  const seen: number[] = [];
  const feed = createResponseFramer((status) => seen.push(status));
  for (const chunk of chunks) feed(chunk);
  return seen;
}

describe('createResponseFramer', () => {
  it('frames a stream delivered at once', () => {
    assert.deepEqual(statusesFor([Buffer.from(STREAM)]), EXPECTED);
  });

  it('frames the same stream split at every byte', () => {
    const bytes = Buffer.from(STREAM);
    assert.deepEqual(statusesFor([...bytes].map((b) => Buffer.from([b]))), EXPECTED);
  });

  it('reports nothing until a response is complete', () => {
    assert.deepEqual(statusesFor([Buffer.from('HTTP/1.1 409 Conflict\r\nContent-Length: 5\r\n\r\nab')]), []);
  });

  it('rejects bytes that are not an HTTP/1.x response', () => {
    assert.throws(() => statusesFor([Buffer.from('SSH-2.0-OpenSSH\r\n\r\n')]), /not an HTTP\/1\.x response/);
  });
});
