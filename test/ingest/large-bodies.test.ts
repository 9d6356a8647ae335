// Webhook bodies of 64 KiB or more are read (checked and parsed) in the runtime's body-reading
// thread, not on the event loop: stored byte for byte, refused with the same errors as a small body,
// and a source deleted or re-keyed while its delivery's body was being read is 404 or 401 with
// nothing stored. On a real runtime; the thread read is held open by a gate, not by timing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { THREAD_READ_BYTES } from '../../runtime/ingest/read-webhook-body.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-large-bodies';
const SECRET = newStandardSecret();
let rt: TestRuntime;
let key: string;
/** Bodies the thread was asked to read, by size. */
const threadReads: number[] = [];
/** When set, a thread read waits for it before it starts. */
let gate: Promise<void> | undefined;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  for (const name of ['big', 'going', 'rotating']) {
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name, secrets: [SECRET], body_limit_bytes: 1024 * 1024 } });
    assert.equal(created.status, 201, created.text);
  }
  const bodies = rt.runtime.context.schemas.bodies;
  const readBody = bodies.readBody.bind(bodies);
  bodies.readBody = async (orgId, text) => {
    threadReads.push(text.length);
    await gate;
    return readBody(orgId, text);
  };
});
after(() => rt.close());

let deliveries = 0;
const deliver = (source: string, body: string) =>
  call(rt.url, 'POST', `/hooks/${ORG}/${source}`, { body, headers: signStandard(SECRET, `msg_${++deliveries}`, Math.floor(Date.now() / 1000), body) });

/** `json` (an object's text, ending in `}`) made at least THREAD_READ_BYTES long by a padding member before its end. */
const padded = (json: string): string => `${json.slice(0, -1)}${json.length > 2 ? ',' : ''}"padding":"${'x'.repeat(THREAD_READ_BYTES)}"}`;

test('a large body is read in the thread and stored byte for byte; a small one is read on the event loop', async () => {
  // Spacing, member order and a number past 2^53 show the stored text is the body as sent.
  const large = padded('{ "type": "order.placed",  "id": "ord_1", "total": 12345678901234567890 }');
  threadReads.length = 0;
  const stored = await deliver('big', large);
  assert.equal(stored.status, 204, stored.text);
  assert.deepEqual(threadReads, [large.length]);
  const eventId = stored.headers.get('sluice-event-id');
  const read = await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key });
  assert.equal(read.status, 200, read.text);
  assert.ok(read.text.includes(large), 'the payload is the body as received');
  assert.deepEqual([read.body.event.type, read.body.event.provider_event_id], ['order.placed', `msg_${deliveries}`]);

  const small = await deliver('big', '{"type":"order.placed","id":"ord_2"}');
  assert.equal(small.status, 204, small.text);
  assert.equal(threadReads.length, 1, 'a small body is not sent to the thread');
});

test('a large body is refused with the same error as the same fault in a small one', async () => {
  const deep = `{"type":"a.b","id":"x","d":${'['.repeat(200)}${']'.repeat(200)}}`;
  const faults: Record<string, string> = {
    malformed: '{"type":"a.b","id":"x","broken":tru}',
    duplicate: '{"type":"a.b","id":"x","type":"c.d"}',
    deep,
    array: '[{"type":"a.b"}]',
    'no type': '{"id":"x"}',
    'bad type': '{"type":"has space","id":"x"}',
    'numeric type': '{"type":7,"id":"x"}',
  };
  for (const [fault, small] of Object.entries(faults)) {
    // Padding goes inside the object (or the array's object), so the fault stays the same.
    const large = small.startsWith('[') ? `[${padded(small.slice(1, -1))}]` : padded(small);
    assert.ok(large.length >= THREAD_READ_BYTES);
    const [smallAnswer, largeAnswer] = [await deliver('big', small), await deliver('big', large)];
    assert.equal(smallAnswer.status, 400, `${fault}: ${smallAnswer.text}`);
    assert.deepEqual([largeAnswer.status, largeAnswer.body.error.code], [smallAnswer.status, smallAnswer.body.error.code], `${fault}: ${largeAnswer.text}`);
    // Positions differ with the padding's place; the wording does not.
    assert.equal(largeAnswer.body.error.message.replace(/\d+/g, 'N'), smallAnswer.body.error.message.replace(/\d+/g, 'N'), fault);
  }
  const invalidUtf8 = Buffer.concat([Buffer.from(padded('{"type":"a.b","id":"x"}').slice(0, -1)), Buffer.from([0xff, 0x22, 0x7d])]);
  const answered = await call(rt.url, 'POST', `/hooks/${ORG}/big`, { body: invalidUtf8, headers: signStandard(SECRET, `msg_${++deliveries}`, Math.floor(Date.now() / 1000), invalidUtf8.toString('latin1')) });
  assert.notEqual(answered.status, 204, answered.text);
});

test('a source deleted while its delivery body was read in the thread is 404, and one whose secret was replaced meanwhile is 401: nothing stored', async () => {
  let release!: () => void;
  gate = new Promise<void>((resolve) => (release = resolve));
  threadReads.length = 0;
  try {
    const going = deliver('going', padded('{"type":"gone.x","id":"g1"}'));
    const rotating = deliver('rotating', padded('{"type":"rot.x","id":"r1"}'));
    await eventually('both bodies reach the thread', () => threadReads.length, (n) => n === 2);
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/sources/going`, { token: key })).status, 204);
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}/sources/rotating`, { token: key, json: { secrets: [newStandardSecret()] } })).status, 200);
    release();
    const [goneAnswer, rotatedAnswer] = await Promise.all([going, rotating]);
    assert.equal(goneAnswer.status, 404, goneAnswer.text);
    assert.equal(rotatedAnswer.status, 401, rotatedAnswer.text);
  } finally {
    gate = undefined;
    release();
  }
  for (const type of ['gone.x', 'rot.x']) {
    const stored = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=${type}`, { token: key });
    assert.deepEqual(stored.body.events, [], `nothing stored of ${type}`);
  }
});
