// Hostile and broken HTTP input against the real uWS server: garbage bytes, truncated and chunked
// bodies, huge headers, wrong methods, odd paths, disconnects. Nothing malformed is stored.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';

const SECRET = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
let rt: TestRuntime;
let key: string;
let port: number;

before(async () => {
  rt = await startRuntime();
  port = rt.runtime.port;
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-bad');
  await call(rt.url, 'POST', '/organizations/acct-bad/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
});
after(async () => rt.close());

/** Writes raw bytes (optionally in pieces), then reads until the server closes or answers fully, bounded by 3 s. */
function raw(pieces: (string | Buffer)[], options: { endEarly?: boolean; port?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(options.port ?? port, '127.0.0.1');
    const received: Buffer[] = [];
    const done = (): void => {
      socket.destroy();
      resolve(Buffer.concat(received).toString('latin1'));
    };
    socket.setTimeout(3000, done);
    socket.on('data', (chunk) => {
      received.push(chunk);
      const text = Buffer.concat(received).toString('latin1');
      const length = /content-length: (\d+)/i.exec(text);
      const bodyStart = text.indexOf('\r\n\r\n');
      if (bodyStart >= 0 && length !== null && text.length - bodyStart - 4 >= Number(length[1])) done();
    });
    socket.on('close', done);
    socket.on('error', done);
    socket.on('connect', async () => {
      for (const piece of pieces) {
        socket.write(piece);
        await new Promise((r) => setImmediate(r));
      }
      if (options.endEarly === true) socket.end();
    });
  });
}

async function eventCount(): Promise<number> {
  const listed = await call(rt.url, 'GET', '/organizations/acct-bad/events?limit=500', { token: key });
  return listed.body.events.length as number;
}

async function serverStillServes(): Promise<void> {
  const health = await call(rt.url, 'GET', '/healthz');
  assert.equal(health.status, 200);
}

test('random bytes and a garbage request line do not crash the server', async () => {
  for (let i = 0; i < 5; i++) await raw([randomBytes(512)]);
  await raw(['NOT-HTTP\r\n\r\n']);
  await serverStillServes();
});

test('a body that arrives in many small chunks is reassembled and verified over the exact bytes', async () => {
  const body = JSON.stringify({ type: 'chunked.ok', data: 'x'.repeat(3000) });
  const headers = signStandard(SECRET, 'msg_chunks', Math.floor(Date.now() / 1000), body);
  const head = `POST /hooks/acct-bad/in HTTP/1.1\r\nhost: x\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  const pieces: string[] = [head];
  for (let i = 0; i < body.length; i += 7) pieces.push(body.slice(i, i + 7));
  const answer = await raw(pieces);
  assert.match(answer, /^HTTP\/1\.1 204/);
});

test('a truncated body or a client that disconnects mid-body stores nothing', async () => {
  const before = await eventCount();
  const body = JSON.stringify({ type: 'trunc.x', data: 'y'.repeat(2000) });
  const headers = signStandard(SECRET, 'msg_trunc', Math.floor(Date.now() / 1000), body);
  const head = `POST /hooks/acct-bad/in HTTP/1.1\r\nhost: x\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  await raw([head, body.slice(0, 500)], { endEarly: true });
  await serverStillServes();
  assert.equal(await eventCount(), before);
  const retried = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body, headers });
  assert.equal(retried.status, 204, 'the provider retry is accepted: the broken attempt claimed nothing');
});

test('shutdown is not held up by a client that disconnected mid-body', async () => {
  const own = await startRuntime();
  const ownKey = await createOrg(own.url, ADMIN_TOKEN, 'acct-gone');
  await call(own.url, 'POST', '/organizations/acct-gone/sources', { token: ownKey, json: { name: 'in', secrets: [SECRET] } });
  const body = JSON.stringify({ type: 'gone.x', data: 'y'.repeat(2000) });
  const headers = signStandard(SECRET, 'msg_gone', Math.floor(Date.now() / 1000), body);
  const head = `POST /hooks/acct-gone/in HTTP/1.1\r\nhost: x\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  await raw([head, body.slice(0, 9)], { endEarly: true, port: own.runtime.port });
  assert.equal((await call(own.url, 'GET', '/healthz')).status, 200);
  // A guard, not a wait: a close that never settles shows up as "hung" instead of ending the test file early.
  let guard: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    own.close().then(() => 'closed'),
    new Promise<string>((resolve) => (guard = setTimeout(() => resolve('hung'), 10_000))),
  ]);
  clearTimeout(guard);
  assert.equal(outcome, 'closed');
});

test('an API write or upload without a key and a hook for an unknown source are answered before their body is sent', async () => {
  // Only the head goes out: a server that read the body first would answer nothing.
  const upload = await raw([`POST /organizations/acct-bad/custom-actions HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=b\r\ncontent-length: ${8 * 1024 * 1024}\r\n\r\n`]);
  assert.match(upload, /^HTTP\/1\.1 401/);
  const apiWithoutKey = await raw([`POST /organizations/acct-bad/events HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${1024 * 1024}\r\n\r\n`]);
  assert.match(apiWithoutKey, /^HTTP\/1\.1 401/);
  // A valid key, but for a path naming another org: no share of that org's body budget.
  const otherOrg = await raw([`POST /organizations/acct-not-mine/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${1024 * 1024}\r\n\r\n`]);
  assert.match(otherOrg, /^HTTP\/1\.1 404/);
  const newOrg = await raw([`POST /organizations HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${1024 * 1024}\r\n\r\n`]);
  assert.match(newOrg, /^HTTP\/1\.1 403/, 'only the platform admin creates orgs');
  const hook = await raw([`POST /hooks/acct-bad/no-such-source HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${1024 * 1024}\r\n\r\n`]);
  assert.match(hook, /^HTTP\/1\.1 404/);
  await serverStillServes();
});

test('a hook URL may repeat a query parameter of its own (providers are given such URLs): the delivery is verified and stored', async () => {
  const body = JSON.stringify({ type: 'query.repeat' });
  const answer = await call(rt.url, 'POST', '/hooks/acct-bad/in?tag=a&tag=b', { body, headers: signStandard(SECRET, 'msg_repeat', Math.floor(Date.now() / 1000), body) });
  assert.equal(answer.status, 204, answer.text);
});

test('huge headers are refused without crashing', async () => {
  const answer = await raw([`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(64 * 1024)}\r\n\r\n`]);
  assert.match(answer, /^HTTP\/1\.1 431/);
  assert.match(answer, /headers_too_large/);
  // A delivery refused so is counted as one (sluice_ingest_total counts every webhook delivery).
  const hook = await raw([`POST /hooks/acct-bad/in HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nx-big: ${'a'.repeat(20 * 1024)}\r\n\r\n{}`]);
  assert.match(hook, /^HTTP\/1\.1 431/);
  assert.match((await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN })).text, /sluice_ingest_total\{outcome="headers_too_large"\} 1/);
  // Whatever the path names: none (404), another method's (405), or one itself past the limit.
  for (const head of [`GET /nope HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20 * 1024)}`, `GET /hooks/acct-bad/in HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20 * 1024)}`, `GET /x${'a'.repeat(17_000)} HTTP/1.1\r\nhost: x`]) {
    assert.match(await raw([`${head}\r\n\r\n`]), /^HTTP\/1\.1 431[^]*headers_too_large/, head.slice(0, 30));
  }
  const enormous = await raw([`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(4 * 1024 * 1024)}\r\n\r\n`]);
  assert.doesNotMatch(enormous, /^HTTP\/1\.1 2/);
  await serverStillServes();
});

test('wrong methods are 405, unknown paths 404, bad escapes and unicode ids 4xx, all as JSON errors', async () => {
  const wrongMethod = await call(rt.url, 'GET', '/hooks/acct-bad/in');
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.body.error.code, 'method_not_allowed');
  // RFC 9110: a 405 lists what the path takes, in `Allow` and (for a person) in the message.
  assert.equal(wrongMethod.headers.get('allow'), 'POST');
  assert.match(wrongMethod.body.error.message, /GET is not allowed on this path; it takes POST\./);
  const put = await call(rt.url, 'PUT', '/organizations', { token: ADMIN_TOKEN, json: {} });
  assert.equal(put.status, 405);
  assert.equal(put.headers.get('allow'), 'GET, HEAD, POST');
  const deleteList = await call(rt.url, 'DELETE', '/organizations/acct-bad/events', { token: ADMIN_TOKEN });
  assert.equal(deleteList.status, 405);
  assert.equal(deleteList.headers.get('allow'), 'GET, HEAD, POST');
  const unknown = await call(rt.url, 'GET', '/nothing/here');
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.error.code, 'route_not_found');
  const badEscape = await raw(['GET /organizations/%E0%A4%A HTTP/1.1\r\nhost: x\r\n\r\n']);
  assert.match(badEscape, /^HTTP\/1\.1 400/);
  assert.match(badEscape, /malformed_path/);
  const unicode = await call(rt.url, 'POST', `/hooks/${encodeURIComponent('ácct-bäd')}/in`, { json: { type: 'x' } });
  assert.equal(unicode.status, 404);
  const unicodeEvent = await call(rt.url, 'GET', `/organizations/acct-bad/events/${encodeURIComponent('évt-☃')}`, { token: key });
  assert.equal(unicodeEvent.status, 404);
  assert.equal(unicodeEvent.body.error.code, 'not_found');
});

test('invalid UTF-8 and deeply broken JSON bodies are 400 and leave no trace', async () => {
  const before = await eventCount();
  const invalidUtf8 = Buffer.from([0x7b, 0x22, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
  const headers = signStandard(SECRET, 'msg_utf8', Math.floor(Date.now() / 1000), invalidUtf8.toString('latin1'));
  const sig = (await import('node:crypto')).createHmac('sha256', Buffer.from(SECRET.slice(6), 'base64'));
  sig.update(`msg_utf8.${headers['webhook-timestamp']}.`).update(invalidUtf8);
  const answer = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body: invalidUtf8, headers: { ...headers, 'webhook-signature': `v1,${sig.digest('base64')}` } });
  assert.equal(answer.status, 400);
  assert.equal(answer.body.error.code, 'malformed_json');
  assert.match(answer.body.error.message, /is not valid UTF-8 \(JSON is always UTF-8, RFC 8259, whatever charset a Content-Type names\)/);
  const deep = '['.repeat(100_000);
  const deepAnswer = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body: deep, headers: signStandard(SECRET, 'msg_deep', Math.floor(Date.now() / 1000), deep) });
  assert.equal(deepAnswer.status, 400);
  assert.equal(await eventCount(), before);
  assert.ok(!JSON.stringify(deepAnswer.body).includes('at '), 'no stack trace in errors');
});

test('a compressed body (Content-Encoding other than identity) is 415 naming the coding, before its signature is checked; identity is accepted', async () => {
  const before = await eventCount();
  const body = JSON.stringify({ type: 'zip.test' });
  const { gzipSync } = await import('node:zlib');
  for (const coding of ['gzip', 'deflate', 'br-bogus']) {
    const sent = coding === 'br-bogus' ? Buffer.from(body) : gzipSync(body);
    const answer = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body: sent, headers: { ...signStandard(SECRET, `msg_enc_${coding}`, Math.floor(Date.now() / 1000), body), 'content-encoding': coding } });
    assert.deepEqual([answer.status, answer.body.error.code, answer.body.error.field], [415, 'unsupported_content_encoding', 'content-encoding'], coding);
    assert.match(answer.body.error.message, new RegExp(`"${coding}"`));
  }
  const api = await call(rt.url, 'POST', '/organizations/acct-bad/events', { token: key, json: { type: 'zip.test' }, headers: { 'content-encoding': 'gzip' } });
  assert.equal(api.status, 415, 'API bodies too');
  assert.equal(await eventCount(), before);
  const plain = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body, headers: { ...signStandard(SECRET, 'msg_enc_identity', Math.floor(Date.now() / 1000), body), 'content-encoding': 'identity' } });
  assert.equal(plain.status, 204);
  const metrics = await call(rt.url, 'GET', '/metrics', { token: ADMIN_TOKEN });
  assert.match(metrics.text, /sluice_ingest_total\{outcome="unsupported_content_encoding"\} 3/, 'hook refusals are counted');
});

test('a Transfer-Encoding other than chunked is refused before the body is read: chunked not last 400, any other coding 501; chunked is accepted', async () => {
  const before = await eventCount();
  const body = JSON.stringify({ type: 'te.test' });
  const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const send = (coding: string, id: string): Promise<string> => {
    const headers = Object.entries(signStandard(SECRET, id, Math.floor(Date.now() / 1000), body)).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    return raw([`POST /hooks/acct-bad/in HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${coding}\r\n${headers}\r\n${chunked}`]);
  };
  for (const [coding, status, code] of [['gzip, chunked', 501, 'unsupported_transfer_encoding'], ['xchunked', 501, 'unsupported_transfer_encoding'], ['chunked, gzip', 400, 'invalid_transfer_encoding'], ['chunked, chunked', 400, 'invalid_transfer_encoding']] as const) {
    const answer = await send(coding, `msg_te_${code}_${status}_${coding.length}`);
    assert.match(answer, new RegExp(`^HTTP/1.1 ${status} `), `${coding}: ${answer.slice(0, 200)}`);
    assert.match(answer, new RegExp(`"code":"${code}"`), coding);
  }
  assert.equal(await eventCount(), before, 'nothing stored');
  assert.match(await send('Chunked', 'msg_te_plain'), /^HTTP\/1.1 204 /);
});

test('a well-formed body nested past 128 levels is refused with 400; 128 levels are stored and read back', async () => {
  const nested = (levels: number): string => `{"type":"deep.x","d":${'['.repeat(levels - 1)}"[{not a bracket}]"${']'.repeat(levels - 1)}}`;
  const before = await eventCount();
  // 200,000 levels parse fine, but the event could then never be serialized again.
  for (const [id, body] of [['msg_nest_huge', nested(200_000)], ['msg_nest_129', nested(129)]] as const) {
    const answer = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) });
    assert.equal(answer.status, 400, id);
    assert.equal(answer.body.error.code, 'json_too_deep');
    assert.match(answer.body.error.message, /128 levels/);
  }
  assert.equal(await eventCount(), before);
  const body = nested(128);
  const accepted = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body, headers: signStandard(SECRET, 'msg_nest_128', Math.floor(Date.now() / 1000), body) });
  assert.equal(accepted.status, 204);
  const read = await call(rt.url, 'GET', `/organizations/acct-bad/events/${accepted.headers.get('sluice-event-id')}`, { token: key });
  assert.equal(read.status, 200);
  assert.equal(JSON.stringify(read.body.event.payload), body);
  const unquotedSecret = await call(rt.url, 'POST', '/organizations/acct-bad/events', { token: key, body: '{"type":"x.y","payload":{"value":sk_live_51HxSECRETvalue}}', headers: { 'content-type': 'application/json' } });
  assert.equal(unquotedSecret.status, 400);
  assert.equal(unquotedSecret.body.error.code, 'malformed_json');
  assert.doesNotMatch(unquotedSecret.text, /sk_live/, 'a parse error never quotes the body');
  const truncated = await call(rt.url, 'POST', '/organizations/acct-bad/events', { token: key, body: '{"type":"x.y"', headers: { 'content-type': 'application/json' } });
  assert.equal(truncated.body.error.message, 'The request body is not valid JSON (at position 13).');
  const viaApi = await call(rt.url, 'POST', '/organizations/acct-bad/events', { token: key, body: `{"type":"deep.x","payload":${'['.repeat(300)}${']'.repeat(300)}}`, headers: { 'content-type': 'application/json' } });
  assert.equal(viaApi.status, 400);
  assert.equal(viaApi.body.error.code, 'json_too_deep');
  await serverStillServes();
});

test('an oversized declared content-length is 413 before the body is read', async () => {
  const answer = await raw([`POST /hooks/acct-bad/in HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${50 * 1024 * 1024}\r\n\r\n{`]);
  assert.match(answer, /^HTTP\/1\.1 413/);
  assert.match(answer, /payload_too_large/);
  await serverStillServes();
});

test('a signed body whose event type breaks the rule is a 400 that states the rule', async () => {
  const send = async (body: string) => {
    const answer = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body, headers: signStandard(SECRET, `msg-type-${randomBytes(4).toString('hex')}`, Math.floor(Date.now() / 1000), body) });
    return answer.body.error as { code: string; message: string; field: string };
  };
  const leadingDot = await send('{"type":".hidden"}');
  assert.deepEqual([leadingDot.code, leadingDot.field], ['invalid_event_type', 'type']);
  assert.match(leadingDot.message, /1-128 .* starting with a letter, digit or "_"/);
  for (const length of [129, 257, 5000]) {
    const long = await send(JSON.stringify({ type: 'a'.repeat(length) }));
    assert.deepEqual([long.code, long.field], ['invalid_event_type', 'type'], `a ${length}-character type is there, and too long`);
  }
  const missing = await send('{"data":{}}');
  assert.deepEqual([missing.code, missing.field], ['missing_event_type', 'type']);
  assert.match(missing.message, /needs a string "type"\. The event type must be 1-128/);
});

test('a body that names a member twice in one object is a 400 and nothing is stored, for webhooks and the API', async () => {
  const body = '{"type":"order.paid","data":{"amount":99999,"amount":1}}';
  const hook = await call(rt.url, 'POST', '/hooks/acct-bad/in', { body, headers: signStandard(SECRET, 'msg-duplicate-member', Math.floor(Date.now() / 1000), body) });
  assert.equal(hook.status, 400, hook.text);
  assert.equal(hook.body.error.code, 'duplicate_json_member');
  assert.match(hook.body.error.message, /at position 44/);
  assert.equal(rt.runtime.ledger.inbox.get(['acct-bad', 'in', 'msg-duplicate-member']), undefined, 'not even claimed');
  const api = await call(rt.url, 'POST', '/organizations/acct-bad/events', { token: key, body: '{"type":"a.b","payload":{},"payload":{"x":1}}', headers: { 'content-type': 'application/json' } });
  assert.equal(api.status, 400, api.text);
  assert.equal(api.body.error.code, 'duplicate_json_member');
});

test('a DELETE sent with a body is 400 unexpected_body and deletes nothing; without one it deletes', async () => {
  const path = '/organizations/acct-bad/sources/doomed';
  assert.equal((await call(rt.url, 'POST', '/organizations/acct-bad/sources', { token: key, json: { name: 'doomed', secrets: [SECRET] } })).status, 201);
  for (const body of ['{"x":1}', '{not json']) {
    const refused = await call(rt.url, 'DELETE', path, { token: key, body, headers: { 'content-type': 'application/json' } });
    assert.equal(refused.status, 400, body);
    assert.equal(refused.body.error.code, 'unexpected_body');
    assert.match(refused.body.error.message, /A DELETE takes no body/);
  }
  assert.equal((await call(rt.url, 'GET', path, { token: key })).status, 200, 'still there');
  assert.equal((await call(rt.url, 'DELETE', path, { token: key })).status, 204);
  assert.equal((await call(rt.url, 'GET', path, { token: key })).status, 404);
  await serverStillServes();
});
