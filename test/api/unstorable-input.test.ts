// Input Sluice could not store as given is refused with a 400 naming it, never stored changed: a
// lone UTF-16 surrogate (read back as U+FFFD), a "__proto__" key in an event schema or as a step id
// (msgpackr renames it; a results map drops it), a webhook URL on port 0 (Node sends to 80 or 443),
// and a Content-Length given twice with different values (a proxy may frame the body by the other),
// whose connection is closed unanswered (the bytes after its head are not served as another request).

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

const ORG = 'acct-unstorable';
const base = `/organizations/${ORG}`;
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

const refusal = async (method: string, path: string, json: unknown, token = key) => {
  const answer = await call(rt.url, method, path, { token, json });
  return [answer.status, answer.body.error?.code, answer.body.error?.field];
};
const webhookStep = (fields: Record<string, unknown>) => ({ name: 'w', trigger_event: 'a.b', steps: [{ type: 'webhook', url: 'https://example.com/in', ...fields }] });

test('a lone surrogate in an API body is a 400 naming where; a paired one (an emoji) is kept', async () => {
  assert.deepEqual(await refusal('POST', '/organizations', { id: 'acct-lone', name: 'Lumen\ud800' }, ADMIN_TOKEN), [400, 'invalid_unicode', 'name']);
  assert.deepEqual(await refusal('POST', `${base}/workflows`, { ...webhookStep({}), name: 'x\udc00' }), [400, 'invalid_unicode', 'name']);
  const schema = { enum: ['ok\ud800'] };
  assert.deepEqual(await refusal('POST', `${base}/sources`, { name: 'lone', secrets: [`whsec_${Buffer.alloc(24, 1).toString('base64')}`], event_types: { 'a.b': schema } }), [400, 'invalid_unicode', 'event_types.a.b.enum[0]']);
  const emoji = await call(rt.url, 'POST', `${base}/workflows`, { token: key, json: { ...webhookStep({}), name: 'Orders 😀' } });
  assert.equal(emoji.status, 201, emoji.text);
  assert.equal((await call(rt.url, 'GET', `${base}/workflows/${emoji.body.workflow.id}`, { token: key })).body.workflow.name, 'Orders 😀');
});

test('a lone surrogate written as an upper-case escape, in a member name or deep in a large array, is found too', async () => {
  const raw = async (text: string) => {
    const answer = await call(rt.url, 'POST', `${base}/events`, { token: key, body: text, headers: { 'content-type': 'application/json' } });
    return [answer.status, answer.body.error?.code, answer.body.error?.field];
  };
  assert.deepEqual(await raw('{"type":"a.b","payload":{"n":"x\\uDC00"}}'), [400, 'invalid_unicode', 'payload.n']);
  assert.deepEqual(await raw('{"type":"a.b","payload":{"k\\uD83D":1}}'), [400, 'invalid_unicode', 'payload (a member name)']);
  const large = `{"type":"a.b","payload":{"list":[${'0,'.repeat(100_000)}"\\ud800"]}}`;
  assert.deepEqual(await raw(large), [400, 'invalid_unicode', 'payload.list[100000]']);
  assert.equal((await raw('{"type":"a.b","payload":{"escaped":"\\\\uD800 is text, not an escape"}}'))[0], 202, 'an escaped backslash before uD800 is plain text');
});

test('an event schema number that would not be stored as written (1e400, a whole number past 2^53) is a 400 for sources and devices; fractions and safe numbers are kept', async () => {
  const secrets = [`whsec_${Buffer.alloc(24, 1).toString('base64')}`];
  const raw = async (method: string, path: string, text: string) => {
    const answer = await call(rt.url, method, path, { token: key, body: text, headers: { 'content-type': 'application/json' } });
    return [answer.status, answer.body.error?.code, answer.body.error?.field, answer.body.error?.message];
  };
  const sourceWith = (schema: string) => `{"name":"exact","secrets":${JSON.stringify(secrets)},"event_types":{"a.b":${schema}}}`;
  for (const number of ['1e400', '-1e400', '12345678901234567890123', '12345678901234567890e0', '9007199254740993.0', '1e-400']) {
    const refused = await raw('POST', `${base}/sources`, sourceWith(`{"properties":{"n":{"enum":[${number}]}}}`));
    assert.deepEqual(refused.slice(0, 3), [400, 'invalid_event_schema', 'event_types'], number);
    assert.match(String(refused[3]), new RegExp(`number ${number.replace('+', '\\+')}`));
    assert.deepEqual((await raw('POST', `${base}/devices`, `{"name":"exact-device","event_types":{"a.b":{"const":${number}}}}`)).slice(0, 3), [400, 'invalid_event_schema', 'event_types'], `device ${number}`);
  }
  assert.equal((await raw('POST', `${base}/sources`, sourceWith('{"properties":{"n":{"maximum":0.1,"minimum":-1e300,"enum":[9007199254740991,2.5e10,10000000000000000000,"1e400"]}}}')))[0], 201);
  assert.deepEqual((await raw('PATCH', `${base}/sources/exact`, '{"event_types":{"a.b":{"maximum":1e400}}}')).slice(0, 3), [400, 'invalid_event_schema', 'event_types']);
  const kept = await call(rt.url, 'GET', `${base}/sources/exact`, { token: key });
  assert.match(kept.text, /"minimum":-1e\+300,"enum":\[9007199254740991,25000000000,10000000000000000000,"1e400"\]/, 'the stored schema is the one written');
  assert.equal((await raw('POST', `${base}/devices`, '{"name":"exact-device","event_types":{"a.b":{"minimum":-0.5}}}'))[0], 201);
  assert.deepEqual((await raw('PATCH', `${base}/devices/exact-device`, '{"event_types":{"a.b":{"minimum":-1e400}}}')).slice(0, 3), [400, 'invalid_event_schema', 'event_types']);
});

test('"__proto__" as an event schema key or as a step id is a 400', async () => {
  const schemas = { 'a.b': { type: 'object', properties: JSON.parse('{"__proto__":{"type":"string"}}') as object } };
  assert.deepEqual(await refusal('POST', `${base}/sources`, { name: 'proto', secrets: [`whsec_${Buffer.alloc(24, 1).toString('base64')}`], event_types: schemas }), [400, 'invalid_event_schema', 'event_types.a.b']);
  assert.deepEqual(await refusal('POST', `${base}/workflows`, webhookStep({ id: '__proto__' })), [400, 'invalid_request', 'steps[0].id']);
});

test('a webhook URL on port 0 is a 400', async () => {
  assert.deepEqual(await refusal('POST', `${base}/workflows`, webhookStep({ url: 'http://127.0.0.1:0/zero-port' })), [400, 'invalid_url', 'steps[0].url']);
});

/** Writes `bytes` on one connection and resolves with all that came back once the server closed it (or after `waitMs`, the connection still open). */
function exchange(bytes: string, waitMs = 3000): Promise<{ text: string; closed: boolean }> {
  const port = Number(new URL(rt.url).port);
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closed: false });
    }, waitMs);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closed: true });
    });
    socket.on('error', reject);
  });
}

test('a Content-Length given twice with different values, or empty, closes the connection unanswered on any route: nothing is stored, and the bytes after the head are never served as another request (smuggling)', async () => {
  const hidden = (id: string): string => {
    const body = JSON.stringify({ type: 'a.b', payload: {}, id });
    return `POST ${base}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };
  const cases = [
    // The uWS parser frames by the first value (0): the hidden request followed as the next one.
    (inner: string) => `POST ${base}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`,
    // The body itself an event, framed by the second value: not stored either.
    (inner: string) => `POST ${base}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${JSON.stringify({ type: 'a.b', payload: {}, id: 'twice' }).length}\r\nContent-Length: 3\r\nConnection: close\r\n\r\n${JSON.stringify({ type: 'a.b', payload: {}, id: 'twice' })}${inner}`,
    // Refused for its key first, and a GET, which reads no body: checked all the same.
    (inner: string) => `POST ${base}/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`,
    (inner: string) => `GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`,
    (inner: string) => `POST ${base}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: \r\n\r\n${inner}`,
  ];
  for (const [i, make] of cases.entries()) {
    const id = `smuggled-${i}`;
    const { text, closed } = await exchange(make(hidden(id)));
    assert.deepEqual({ text, closed }, { text: '', closed: true }, `case ${i}: closed, unanswered`);
    assert.equal((await call(rt.url, 'GET', `${base}/events/${id}`, { token: key })).status, 404, `case ${i}: the hidden request was not carried out`);
  }
  assert.equal((await call(rt.url, 'GET', `${base}/events/twice`, { token: key })).status, 404);
  // A well-framed request on such a connection is served, and the connection kept.
  const served = await exchange(hidden('framed-well'), 500);
  assert.match(served.text, /^HTTP\/1\.1 202 /, served.text);
  assert.equal(served.closed, false);
});
