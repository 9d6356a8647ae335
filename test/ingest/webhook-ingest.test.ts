// Signed webhook ingest end to end over real HTTP: all three schemes, dedup, schemas, caps,
// rotation, the injected clock's timestamp tolerance and inbox pruning.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { MAX_SIGNATURES } from '../../runtime/ingest/verification.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';

const START = Date.UTC(2026, 10, 30, 12, 0, 0);
const clock = new ManualClock(START);
const nowSeconds = (): number => Math.floor(clock.now() / 1000);
const SECRET = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const SECRET_2 = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime({ clock, args: ['--dedup-window-ms', String(60 * 60 * 1000)] });
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-hooks');
  const sources = [
    { name: 'billing', scheme: 'standard-webhooks', secrets: [SECRET] },
    { name: 'billing-2', scheme: 'standard-webhooks', secrets: [SECRET] },
    { name: 'stripe', scheme: 'stripe', secrets: ['whsec_stripe_test_secret'] },
    { name: 'gh', scheme: 'github', secrets: ['github-secret-123'] },
    { name: 'tiny', scheme: 'standard-webhooks', secrets: [SECRET], body_limit_bytes: 2048 },
    {
      name: 'typed',
      secrets: [SECRET],
      event_types: {
        'payment.succeeded': {
          type: 'object',
          required: ['type', 'data'],
          properties: { data: { type: 'object', required: ['amount'], properties: { amount: { type: 'integer', minimum: 1 } } } },
        },
        // Exponential on a backtracking engine. RE2 runs it in linear time; that RE2 is the engine
        // is pinned by test/api/sources.test.ts, where a lookahead (which RE2 lacks) is refused.
        'user.named': { type: 'object', properties: { name: { $ref: '#/definitions/name' } }, definitions: { name: { type: 'string', pattern: '^(a+)+$' } } },
      },
    },
  ];
  for (const source of sources) {
    const created = await call(rt.url, 'POST', '/organizations/acct-hooks/sources', { token: key, json: source });
    assert.equal(created.status, 201, created.text);
  }
});
after(async () => rt.close());

function sendStandard(source: string, id: string, payload: unknown, secret = SECRET, org = 'acct-hooks', at = nowSeconds()) {
  const body = JSON.stringify(payload);
  return call(rt.url, 'POST', `/hooks/${org}/${source}`, { body, headers: signStandard(secret, id, at, body) });
}

test('a signed standard webhook is accepted with 204, a repeat is 409 naming the original', async () => {
  const first = await sendStandard('billing', 'msg_1', { type: 'payment.succeeded', data: { amount: 10 } });
  assert.equal(first.status, 204);
  const eventId = first.headers.get('sluice-event-id');
  assert.match(eventId ?? '', /^evt_/);
  const repeat = await sendStandard('billing', 'msg_1', { type: 'payment.succeeded', data: { amount: 10 } });
  assert.equal(repeat.status, 409);
  assert.equal(repeat.body.error.code, 'duplicate_event');
  assert.equal(repeat.body.error.original_event_id, eventId);

  const fetched = await call(rt.url, 'GET', `/organizations/acct-hooks/events/${eventId}`, { token: key });
  assert.equal(fetched.status, 200);
  assert.equal(fetched.body.event.type, 'payment.succeeded');
  assert.equal(fetched.body.event.provider_event_id, 'msg_1');
  assert.equal(fetched.body.event.source, 'billing');
  assert.deepEqual(fetched.body.event.payload, { type: 'payment.succeeded', data: { amount: 10 } });
  assert.deepEqual(fetched.body.reactions, []);
  assert.equal(fetched.body.recording.headers['webhook-signature'], '[redacted]');
  assert.equal(fetched.body.recording.headers['content-type'], 'application/json', 'other headers are kept');
  assert.equal(fetched.body.recording.verifier.key_index, 0);

  // Header names are data: one named like an Object member is recorded as sent.
  const named = JSON.stringify({ type: 'payment.succeeded', data: { amount: 12 } });
  const odd = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body: named, headers: { ...signStandard(SECRET, 'msg_constructor', nowSeconds(), named), constructor: 'x' } });
  assert.equal(odd.status, 204, odd.text);
  const oddEvent = await call(rt.url, 'GET', `/organizations/acct-hooks/events/${odd.headers.get('sluice-event-id')}`, { token: key });
  assert.equal(oddEvent.body.recording.headers['constructor'], 'x');

  // Providers put tokens in headers of their own naming: any name that says so is redacted too.
  const body = JSON.stringify({ type: 'payment.succeeded', data: { amount: 11 } });
  const tokens = { 'x-gitlab-token': 'glpat-SECRET', 'x-webhook-secret': 'SECRET', 'x-auth-token': 'SECRET', 'x-session-id': 'SECRET', 'x-api-key': 'SECRET', 'x-webhook-key': 'SECRET', 'x-signing-key': 'SECRET', 'x-password': 'SECRET', 'x-shopify-hmac-sha256': 'SECRET', 'x-pwd': 'SECRET', 'x-passphrase': 'SECRET', 'paypal-transmission-sig': 'SECRET', 'x-trello-webhook': 'SECRET', 'plaid-verification': 'SECRET', 'x-secret-idempotency-key': 'SECRET', 'x-auth-idempotency-key': 'SECRET' };
  const sent = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: { ...signStandard(SECRET, 'msg_tokens', nowSeconds(), body), ...tokens, 'idempotency-key': 'order-77', 'x-idempotency-key': 'order-77b' } });
  assert.equal(sent.status, 204, sent.text);
  const recorded = (await call(rt.url, 'GET', `/organizations/acct-hooks/events/${sent.headers.get('sluice-event-id')}`, { token: key })).body.recording;
  for (const name of Object.keys(tokens)) assert.equal(recorded.headers[name], '[redacted]', name);
  assert.ok(!JSON.stringify(recorded).includes('SECRET'));
  assert.equal(recorded.headers['idempotency-key'], 'order-77', 'an idempotency key is not a credential: kept for triage');
  assert.equal(recorded.headers['x-idempotency-key'], 'order-77b');
  assert.equal(recorded.headers['webhook-id'], 'msg_tokens', 'other headers are kept as sent');
  assert.equal(fetched.body.recording.body, JSON.stringify({ type: 'payment.succeeded', data: { amount: 10 } }));
});

test('twenty concurrent copies of one delivery store exactly one event', async () => {
  const before = (await call(rt.url, 'GET', '/organizations/acct-hooks/events?limit=500', { token: key })).body.events.length;
  const answers = await Promise.all(Array.from({ length: 20 }, () => sendStandard('billing', 'msg_race', { type: 'race.x' })));
  const statuses = answers.map((a) => a.status).sort();
  assert.deepEqual(statuses, [204, ...Array(19).fill(409)]);
  const winner = answers.find((a) => a.status === 204)!.headers.get('sluice-event-id');
  assert.ok(answers.filter((a) => a.status === 409).every((a) => a.body.error.original_event_id === winner), 'every loser names the stored event');
  const after = (await call(rt.url, 'GET', '/organizations/acct-hooks/events?limit=500', { token: key })).body.events.length;
  assert.equal(after, before + 1);
});

test('the same provider event id in two sources or two orgs is two events', async () => {
  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-hooks-2');
  await call(rt.url, 'POST', '/organizations/acct-hooks-2/sources', { token: otherKey, json: { name: 'billing', secrets: [SECRET] } });
  const a = await sendStandard('billing', 'msg_shared', { type: 't.x' });
  const b = await sendStandard('billing-2', 'msg_shared', { type: 't.x' });
  const c = await sendStandard('billing', 'msg_shared', { type: 't.x' }, SECRET, 'acct-hooks-2');
  assert.deepEqual([a.status, b.status, c.status], [204, 204, 204]);
  assert.equal(new Set([a, b, c].map((r) => r.headers.get('sluice-event-id'))).size, 3);
});

test('signature failures are 401: wrong secret, missing or malformed signed header, stale or future timestamp', async () => {
  const wrong = await sendStandard('billing', 'msg_wrong', { type: 't.x' }, SECRET_2);
  assert.equal(wrong.status, 401);
  assert.equal(wrong.body.error.code, 'invalid_signature');
  const body = JSON.stringify({ type: 't.x' });
  const headers = signStandard(SECRET, 'msg_nosig', nowSeconds(), body);
  delete headers['webhook-signature'];
  const missing = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers });
  assert.equal(missing.status, 401);
  assert.equal(missing.body.error.code, 'missing_signature');
  const stale = await sendStandard('billing', 'msg_stale', { type: 't.x' }, SECRET, 'acct-hooks', nowSeconds() - 301);
  assert.equal(stale.status, 401);
  assert.equal(stale.body.error.code, 'stale_timestamp');
  assert.equal(stale.body.error.message, 'The webhook-timestamp header is more than 300 seconds away from now.');
  // An empty body, signed as any: told it is empty, as the API says, not "not valid JSON".
  const empty = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body: '', headers: signStandard(SECRET, 'msg_empty', nowSeconds(), '') });
  assert.equal(empty.status, 400, empty.text);
  assert.deepEqual([empty.body.error.code, empty.body.error.message], ['malformed_json', 'The request body is empty; a JSON document is required.']);
  const future = await sendStandard('billing', 'msg_future', { type: 't.x' }, SECRET, 'acct-hooks', nowSeconds() + 301);
  assert.equal(future.status, 401);
  const edge = await sendStandard('billing', 'msg_edge', { type: 't.x' }, SECRET, 'acct-hooks', nowSeconds() - 300);
  assert.equal(edge.status, 204);
  // As the Standard Webhooks libraries: whole seconds, so 300.9 s old is still inside the tolerance.
  clock.advance(900);
  const edgeWithinSecond = await sendStandard('billing', 'msg_edge_frac', { type: 't.x' }, SECRET, 'acct-hooks', nowSeconds() - 300);
  assert.equal(edgeWithinSecond.status, 204);
  const tampered = signStandard(SECRET, 'msg_tamper', nowSeconds(), body);
  const changed = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body: body.replace('t.x', 't.y'), headers: tampered });
  assert.equal(changed.status, 401);
  const badTs = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: { ...tampered, 'webhook-timestamp': 'yesterday' } });
  assert.equal(badTs.status, 401);
  assert.equal(badTs.body.error.code, 'invalid_signature_header');
  assert.equal(badTs.body.error.field, 'headers.webhook-timestamp');
  // The id and the timestamp are part of what is signed: without either nothing can be verified.
  for (const header of ['webhook-id', 'webhook-timestamp']) {
    const signed = signStandard(SECRET, `msg_no_${header}`, nowSeconds(), body);
    delete signed[header];
    const answer = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: signed });
    assert.equal(answer.status, 401, answer.text);
    assert.equal(answer.body.error.code, 'invalid_signature_header');
    assert.equal(answer.body.error.field, `headers.${header}`);
    assert.match(answer.body.error.message, new RegExp(`${header} header is required`));
  }
  const oddId = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: signStandard(SECRET, 'msg with space', nowSeconds(), body) });
  assert.equal(oddId.status, 401, oddId.text);
  assert.equal(oddId.body.error.field, 'headers.webhook-id');
});

test('stripe: t + v1 hex over "t.body", several v1 allowed, v0 ignored, id and type from the body', async () => {
  const body = JSON.stringify({ id: 'evt_stripe_1', type: 'invoice.paid', data: {} });
  const t = nowSeconds();
  const good = createHmac('sha256', 'whsec_stripe_test_secret').update(`${t}.${body}`).digest('hex');
  const header = `t=${t},v0=${'0'.repeat(64)},v1=${'a'.repeat(64)},v1=${good}`;
  const ok = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': header } });
  assert.equal(ok.status, 204, ok.text);
  const repeat = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': header } });
  assert.equal(repeat.status, 409);
  const onlyV0 = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v0=${good}` } });
  assert.equal(onlyV0.status, 401);
  const stale = createHmac('sha256', 'whsec_stripe_test_secret').update(`${t - 400}.${body}`).digest('hex');
  const staleAnswer = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t - 400},v1=${stale}` } });
  assert.equal(staleAnswer.status, 401);
  assert.equal(staleAnswer.body.error.message, "The Stripe-Signature header's t= timestamp is more than 300 seconds away from now.");
  for (const malformed of [`t=${t},${good}`, `v1=${good}`]) {
    const answer = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': malformed } });
    assert.equal(answer.status, 401, `${malformed}: ${answer.text}`);
    assert.equal(answer.body.error.code, 'invalid_signature_header');
    assert.equal(answer.body.error.field, 'headers.stripe-signature');
  }
  const noTimestamp = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body, headers: { 'content-type': 'application/json', 'stripe-signature': `v1=${good}` } });
  assert.equal(noTimestamp.body.error.message, 'The Stripe-Signature header has no t= timestamp.');
  const noId = JSON.stringify({ type: 'invoice.paid' });
  const noIdSig = createHmac('sha256', 'whsec_stripe_test_secret').update(`${t}.${noId}`).digest('hex');
  const missingId = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body: noId, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${noIdSig}` } });
  assert.equal(missingId.status, 400);
  assert.equal(missingId.body.error.field, 'id');
  for (const id of ['evt with spaces', 'evt\u0000nul', 'é'.repeat(10)]) {
    const odd = JSON.stringify({ id, type: 'invoice.paid' });
    const oddSig = createHmac('sha256', 'whsec_stripe_test_secret').update(`${t}.${odd}`).digest('hex');
    const refused = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body: odd, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${oddSig}` } });
    assert.equal(refused.status, 400, `id ${JSON.stringify(id)}: a dedup key is printable ASCII, as webhook-id headers are`);
    assert.equal(refused.body.error.field, 'id');
    // There, but not usable: not "missing".
    assert.equal(refused.body.error.code, 'invalid_event_id');
  }
});

test(`at most ${MAX_SIGNATURES} signatures per delivery: the last of ${MAX_SIGNATURES} verifies, one more is 401 too_many_signatures (standard and stripe)`, async () => {
  const body = JSON.stringify({ type: 't.x' });
  const signed = signStandard(SECRET, 'msg_many_sigs', nowSeconds(), body);
  const decoys = (n: number): string[] => Array.from({ length: n }, (_, i) => `v1,${Buffer.alloc(32, i).toString('base64')}`);
  const withSignatures = (list: string[]) => ({ ...signed, 'webhook-signature': list.join(' ') });
  const tooMany = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: withSignatures([...decoys(MAX_SIGNATURES), signed['webhook-signature']!]) });
  assert.deepEqual([tooMany.status, tooMany.body.error.code], [401, 'too_many_signatures'], tooMany.text);
  assert.match(tooMany.body.error.message, new RegExp(`carries ${MAX_SIGNATURES + 1} signatures; at most ${MAX_SIGNATURES}`));
  const enough = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: withSignatures([...decoys(MAX_SIGNATURES - 1), signed['webhook-signature']!]) });
  assert.equal(enough.status, 204, enough.text);
  // Entries of other versions count too (only v1 ones are compared).
  const otherVersions = Array.from({ length: MAX_SIGNATURES }, (_, i) => `v1a,${Buffer.alloc(64, i).toString('base64')}`);
  const mixed = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body, headers: withSignatures([...otherVersions, signed['webhook-signature']!]) });
  assert.deepEqual([mixed.status, mixed.body.error.code], [401, 'too_many_signatures'], mixed.text);

  const stripeBody = JSON.stringify({ id: 'evt_many_sigs', type: 'invoice.paid' });
  const t = nowSeconds();
  const good = createHmac('sha256', 'whsec_stripe_test_secret').update(`${t}.${stripeBody}`).digest('hex');
  const stripe = await call(rt.url, 'POST', '/hooks/acct-hooks/stripe', { body: stripeBody, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},${'v1=00,'.repeat(MAX_SIGNATURES)}v1=${good}` } });
  assert.deepEqual([stripe.status, stripe.body.error.code], [401, 'too_many_signatures'], stripe.text);
});

test('github: sha256 over the raw body, delivery id and event from headers', async () => {
  const body = JSON.stringify({ action: 'opened', number: 7 });
  const signature = `sha256=${createHmac('sha256', 'github-secret-123').update(body).digest('hex')}`;
  const headers = { 'content-type': 'application/json', 'x-hub-signature-256': signature, 'x-github-delivery': 'd-1', 'x-github-event': 'pull_request' };
  const ok = await call(rt.url, 'POST', '/hooks/acct-hooks/gh', { body, headers });
  assert.equal(ok.status, 204, ok.text);
  const event = await call(rt.url, 'GET', `/organizations/acct-hooks/events/${ok.headers.get('sluice-event-id')}`, { token: key });
  assert.equal(event.body.event.type, 'pull_request');
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-hooks/gh', { body, headers })).status, 409);
  const bad = await call(rt.url, 'POST', '/hooks/acct-hooks/gh', { body, headers: { ...headers, 'x-github-delivery': 'd-2', 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` } });
  assert.equal(bad.status, 401);
  // The delivery id and the event name are not signed: a request without them is malformed, not forged.
  const { 'x-github-delivery': _delivery, ...withoutDelivery } = headers;
  const noDelivery = await call(rt.url, 'POST', '/hooks/acct-hooks/gh', { body, headers: withoutDelivery });
  assert.equal(noDelivery.status, 400, noDelivery.text);
  assert.equal(noDelivery.body.error.code, 'invalid_header');
  assert.equal(noDelivery.body.error.field, 'headers.x-github-delivery');
  // The event name's own rule and reserved names, said of the header (no body field is involved).
  const refusals: Array<[string, string, RegExp]> = [
    ['a b', 'invalid_header', /^The X-GitHub-Event header is not an event type\. The event type must be/],
    ['.x', 'invalid_header', /^The X-GitHub-Event header is not an event type/],
    ['device.connected', 'reserved_event_type', /written by Sluice/],
  ];
  for (const [i, [name, code, message]] of refusals.entries()) {
    const refused = await call(rt.url, 'POST', '/hooks/acct-hooks/gh', { body, headers: { ...headers, 'x-github-delivery': `d-event-${i}`, 'x-github-event': name } });
    assert.deepEqual([refused.status, refused.body.error.code, refused.body.error.field], [400, code, 'headers.x-github-event'], name);
    assert.match(refused.body.error.message, message, name);
  }
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-hooks/gh', { body, headers: { ...headers, 'x-github-delivery': 'd-colon', 'x-github-event': 'repo:push' } })).status, 204, 'a colon is allowed in event types');
});

test('declared schemas: 422 naming the failing field; undeclared types pass unvalidated', async () => {
  const bad = await sendStandard('typed', 'msg_s1', { type: 'payment.succeeded', data: { amount: 0 } });
  assert.equal(bad.status, 422);
  assert.equal(bad.body.error.code, 'schema_validation_failed');
  assert.equal(bad.body.error.field, 'payload.data.amount');
  const missing = await sendStandard('typed', 'msg_s2', { type: 'payment.succeeded' });
  assert.equal(missing.status, 422);
  assert.equal(missing.body.error.field, 'payload.data');
  assert.equal((await sendStandard('typed', 'msg_s3', { type: 'payment.succeeded', data: { amount: 5 } })).status, 204);
  assert.equal((await sendStandard('typed', 'msg_s4', { type: 'refund.created' })).status, 204);
  const retried = await sendStandard('typed', 'msg_s1', { type: 'payment.succeeded', data: { amount: 3 } });
  assert.equal(retried.status, 204, 'a rejected delivery claims nothing, so the corrected retry is accepted');
  // A copy of a stored delivery that the schema (changed since, say) refuses is the duplicate it is.
  const copy = await sendStandard('typed', 'msg_s3', { type: 'payment.succeeded', data: { amount: 0 } });
  assert.deepEqual([copy.status, copy.body.error.code], [409, 'duplicate_event'], copy.text);
  for (const type of ['constructor', 'toString', 'hasOwnProperty']) {
    const answer = await sendStandard('typed', `msg_proto_${type}`, { type });
    assert.equal(answer.status, 204, `"${type}" declares no schema: ${answer.text}`);
  }
  // "__proto__" is no event type: it could not key a source's schema map in storage.
  const proto = await sendStandard('typed', 'msg_proto___proto__', { type: '__proto__' });
  assert.equal(proto.status, 400, proto.text);
  assert.equal(proto.body.error.code, 'invalid_event_type');
});

test('a catastrophic-backtracking schema pattern answers 422 naming the field, and a matching value passes', async () => {
  // 24 "a"s keep this test short on V8's engine too (RE2 is pinned elsewhere); 40 would take V8 hours.
  const hostile = await sendStandard('typed', 'msg_redos', { type: 'user.named', name: `${'a'.repeat(24)}!` });
  assert.equal(hostile.status, 422);
  assert.equal(hostile.body.error.field, 'payload.name');
  assert.equal((await sendStandard('typed', 'msg_redos_ok', { type: 'user.named', name: 'aaaa' })).status, 204);
});

test('413 over the per-source cap, 415 for non-JSON, 400 for malformed JSON, 404 for unknown org/source', async () => {
  const big = await sendStandard('tiny', 'msg_big', { type: 't.x', pad: 'x'.repeat(4096) });
  assert.equal(big.status, 413);
  assert.equal(big.body.error.code, 'payload_too_large');
  assert.equal((await sendStandard('billing', 'msg_ok_big', { type: 't.x', pad: 'x'.repeat(4096) })).status, 204);

  const text = 'type=t.x';
  const form = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body: text, headers: { ...signStandard(SECRET, 'msg_form', nowSeconds(), text), 'content-type': 'text/plain' } });
  assert.equal(form.status, 415);
  const broken = '{"type": "t.x",';
  const malformed = await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body: broken, headers: signStandard(SECRET, 'msg_broken', nowSeconds(), broken) });
  assert.equal(malformed.status, 400);
  assert.equal(malformed.body.error.code, 'malformed_json');
  const array = '[1,2]';
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-hooks/billing', { body: array, headers: signStandard(SECRET, 'msg_arr', nowSeconds(), array) })).status, 400);
  assert.equal((await sendStandard('nope', 'msg_x', { type: 't.x' })).status, 404);
  assert.equal((await sendStandard('billing', 'msg_x', { type: 't.x' }, SECRET, 'acct-nope')).status, 404);
  const noType = await sendStandard('billing', 'msg_notype', { data: 1 });
  assert.equal(noType.status, 400);
  assert.equal(noType.body.error.field, 'type');
});

test('rotation: old and new secrets both verify until the old one is removed; secrets are never returned', async () => {
  const rotated = await call(rt.url, 'PATCH', '/organizations/acct-hooks/sources/billing', { token: key, json: { secrets: [SECRET, SECRET_2] } });
  assert.equal(rotated.status, 200);
  assert.equal(rotated.body.source.active_secrets, 2);
  assert.ok(!rotated.text.includes(SECRET.slice(6, 20)));
  assert.equal((await sendStandard('billing', 'msg_rot1', { type: 't.x' }, SECRET)).status, 204);
  assert.equal((await sendStandard('billing', 'msg_rot2', { type: 't.x' }, SECRET_2)).status, 204);
  await call(rt.url, 'PATCH', '/organizations/acct-hooks/sources/billing', { token: key, json: { secrets: [SECRET_2] } });
  assert.equal((await sendStandard('billing', 'msg_rot3', { type: 't.x' }, SECRET)).status, 401);
  const listed = await call(rt.url, 'GET', '/organizations/acct-hooks/sources', { token: key });
  assert.ok(!listed.text.includes(SECRET_2.slice(6, 20)), 'no secret in list answers');
  assert.ok(!listed.text.includes('stripe_test_secret'));
});

test('an expired claim that was not pruned yet is replaced: the delivery is new again and a repeat is a 409 naming it', async () => {
  const first = await sendStandard('billing', 'msg_unpruned', { type: 't.x' }, SECRET_2);
  assert.equal(first.status, 204);
  clock.advance(61 * 60 * 1000);
  assert.ok(rt.runtime.ledger.inbox.get(['acct-hooks', 'billing', 'msg_unpruned']) !== undefined, 'the expired claim is still stored');
  const second = await sendStandard('billing', 'msg_unpruned', { type: 't.x' }, SECRET_2);
  assert.equal(second.status, 204);
  const secondId = second.headers.get('sluice-event-id');
  assert.ok(secondId !== null && secondId !== first.headers.get('sluice-event-id'), 'a new event, not the old one');
  const claim = rt.runtime.ledger.inbox.get(['acct-hooks', 'billing', 'msg_unpruned']) as { event_id: string };
  assert.equal(claim.event_id, secondId);
  const repeat = await sendStandard('billing', 'msg_unpruned', { type: 't.x' }, SECRET_2);
  assert.equal(repeat.status, 409);
  assert.equal(repeat.body.error.original_event_id, secondId);
});

test('dedup claims expire after the window and are pruned; then the id is new again', async () => {
  assert.equal((await sendStandard('billing', 'msg_window', { type: 't.x' }, SECRET_2)).status, 204);
  clock.advance(30 * 60 * 1000);
  assert.equal((await sendStandard('billing', 'msg_window', { type: 't.x' }, SECRET_2)).status, 409);
  clock.advance(31 * 60 * 1000);
  const pruned = await rt.runtime.inbox.prune(clock.now());
  assert.ok(pruned >= 1, `pruned ${pruned}`);
  assert.equal(rt.runtime.ledger.inbox.get(['acct-hooks', 'billing', 'msg_window']), undefined);
  assert.equal((await sendStandard('billing', 'msg_window', { type: 't.x' }, SECRET_2)).status, 204);
});

test('one prune removes every expired claim, however many, in bounded passes', async () => {
  const ids = Array.from({ length: 5 }, (_, i) => `msg_backlog_${i}`);
  for (const id of ids) assert.equal((await sendStandard('billing', id, { type: 't.x' }, SECRET_2)).status, 204);
  clock.advance(61 * 60 * 1000);
  const pruned = await rt.runtime.inbox.prune(clock.now(), 2);
  assert.ok(pruned >= ids.length, `pruned ${pruned}`);
  for (const id of ids) assert.equal(rt.runtime.ledger.inbox.get(['acct-hooks', 'billing', id]), undefined, id);
});

test('a schema changed within the same millisecond applies at once: the cached validator goes with the write', async () => {
  const path = '/organizations/acct-hooks/sources';
  const strict = { 'order.placed': { type: 'object', required: ['total'] } };
  assert.equal((await call(rt.url, 'POST', path, { token: key, json: { name: 'schema-swap', secrets: [SECRET], event_types: strict } })).status, 201);
  assert.equal((await sendStandard('schema-swap', 'msg_swap_1', { type: 'order.placed' })).status, 422, 'total is required');
  // The injected clock stands still: the source's updated_at does not change with this PATCH.
  assert.equal((await call(rt.url, 'PATCH', `${path}/schema-swap`, { token: key, json: { event_types: { 'order.placed': { type: 'object' } } } })).status, 200);
  assert.equal((await sendStandard('schema-swap', 'msg_swap_2', { type: 'order.placed' })).status, 204, 'the new schema, not the cached old one');
});

test('a webhook may not claim a device connection event type, which only Sluice writes (400 reserved_event_type)', async () => {
  const forged = await sendStandard('billing-2', 'msg_forged_disconnect', { type: 'device.disconnected', data: { device: 'kiosk-1' } });
  assert.deepEqual([forged.status, forged.body.error?.code, forged.body.error?.field], [400, 'reserved_event_type', 'type']);
});
