// A payload is handed on exactly as it was received: integers past 2^53 and numbers beyond a
// double (a Shopify-style id, 1e400) reach a webhook step's receiver, the event API's answers and a
// business replay as the sender wrote them, not as JSON.parse would round them.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-exact';
const SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
let rt: TestRuntime;
let key: string;
let receiver: Receiver;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  receiver = await startReceiver();
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'shop', secrets: [SECRET] } })).status, 201);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'w', trigger_event: 'orders.create', steps: [{ id: 'notify', type: 'webhook', url: `${receiver.url}/exact` }] } });
  assert.equal(wf.status, 201, wf.text);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** The raw text of an answer (fetch, not the helper, which parses). */
const text = async (path: string, init: RequestInit = {}): Promise<{ status: number; text: string }> => {
  const answer = await fetch(`${rt.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } });
  return { status: answer.status, text: await answer.text() };
};

test('a webhook payload reaches the step receiver and the event API as received', async () => {
  const body = '{"type":"orders.create","id":820982911946154508,"total":1e400,"price":19.990000000000001}';
  const sent = await call(rt.url, 'POST', `/hooks/${ORG}/shop`, { body, headers: signStandard(SECRET, 'msg-exact-1', Math.floor(Date.now() / 1000), body) });
  assert.equal(sent.status, 204, sent.text);
  const eventId = sent.headers.get('sluice-event-id')!;
  const [delivery] = await eventually('the step delivery', () => receiver.received.filter((r) => r.path === '/exact'), (r) => r.length === 1);
  assert.ok(delivery!.body.includes(`"payload":${body}`), delivery!.body);
  const read = await text(`/organizations/${ORG}/events/${eventId}`);
  assert.equal(read.status, 200);
  assert.ok(read.text.includes(`"payload":${body}`), read.text);
  const listed = await text(`/organizations/${ORG}/events?limit=5`);
  assert.ok(listed.text.includes(`"payload":${body}`), listed.text);
});

test('an API event keeps its payload text, in the 202, on read and through a replay', async () => {
  const payload = '{ "n" : 12345678901234567890, "x": [1e999, -0.0] }';
  const created = await text(`/organizations/${ORG}/events`, { method: 'POST', body: `{"type":"other.thing","id":"exact-api","payload":${payload}}` });
  assert.equal(created.status, 202, created.text);
  assert.ok(created.text.includes(`"payload":${payload}`), created.text);
  assert.ok((await text(`/organizations/${ORG}/events/exact-api`)).text.includes(`"payload":${payload}`));
  const replayed = await text(`/organizations/${ORG}/events/exact-api/replay`, { method: 'POST', body: '{"side_effects":"skip"}' });
  assert.equal(replayed.status, 202, replayed.text);
  assert.ok(replayed.text.includes(`"payload":${payload}`), replayed.text);
  const replayId = (JSON.parse(replayed.text) as { event: { id: string } }).event.id;
  assert.ok((await text(`/organizations/${ORG}/events/${replayId}`)).text.includes(`"payload":${payload}`), 'the replay stored the original text');
});

test('the failed-events triage list carries the event payload as received', async () => {
  const failing = await startReceiver([{ status: 400, body: 'no' }]);
  try {
    const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'refused', trigger_event: 'orders.refused', steps: [{ id: 'send', type: 'webhook', url: failing.url }] } });
    assert.equal(wf.status, 201, wf.text);
    const payload = '{"order_id":820982911946154508,"huge":1e400}';
    const created = await text(`/organizations/${ORG}/events`, { method: 'POST', body: `{"type":"orders.refused","id":"exact-failed","payload":${payload}}` });
    assert.equal(created.status, 202, created.text);
    await eventually('the run to fail', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/exact-failed`, { token: key })).body.reactions, (r: Array<{ state: string }>) => r.length === 1 && r[0]!.state === 'failed');
    const triage = await text(`/organizations/${ORG}/failed-events`);
    assert.equal(triage.status, 200);
    assert.ok(triage.text.includes(`"payload":${payload}`), triage.text);
  } finally {
    await failing.close();
  }
});
