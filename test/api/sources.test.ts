// The sources API: validation of schemes and secrets, CRUD, and that secrets never come back.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { MAX_SOURCES_PER_ORG } from '../../runtime/sources/source-store.ts';

const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-src');
});
after(async () => rt.close());

const base = '/organizations/acct-src/sources';

test('create, get, list, delete; the answer never holds a secret', async () => {
  const created = await call(rt.url, 'POST', base, { token: key, json: { name: 'billing', secrets: [SECRET], environment: 'sandbox' } });
  assert.equal(created.status, 201);
  assert.equal(created.body.source.scheme, 'standard-webhooks');
  assert.equal(created.body.source.environment, 'sandbox');
  assert.equal(created.body.source.body_limit_bytes, 1024 * 1024);
  assert.equal(created.body.source.ingest_path, '/hooks/acct-src/billing');
  assert.ok(!created.text.includes(SECRET.slice(6)), 'no secret in the create answer');
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'billing', secrets: [SECRET] } })).status, 409);
  const sandbox = `${base}/billing?environment=sandbox`;
  const got = await call(rt.url, 'GET', sandbox, { token: key });
  assert.equal(got.body.source.active_secrets, 1);
  assert.ok(!got.text.includes(SECRET.slice(6)));
  assert.equal((await call(rt.url, 'GET', `${base}?environment=sandbox`, { token: key })).body.sources.length, 1);
  assert.equal((await call(rt.url, 'DELETE', sandbox, { token: key })).status, 204);
  assert.equal((await call(rt.url, 'GET', sandbox, { token: key })).status, 404);
  assert.equal((await call(rt.url, 'DELETE', sandbox, { token: key })).status, 404);
});

test('every source request is scoped to one environment: the other one\'s sources are not listed, read, changed or deleted', async () => {
  const org = 'acct-src-env';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const path = `/organizations/${org}/sources`;
  assert.equal((await call(rt.url, 'POST', path, { token: orgKey, json: { name: 'live', secrets: [SECRET] } })).status, 201);
  assert.equal((await call(rt.url, 'POST', path, { token: orgKey, json: { name: 'trial', secrets: [SECRET], environment: 'sandbox' } })).status, 201);
  const names = async (environment: string) => ((await call(rt.url, 'GET', `${path}?environment=${environment}`, { token: orgKey })).body.sources as Array<{ name: string }>).map((s) => s.name);
  assert.deepEqual(await names('production'), ['live']);
  assert.deepEqual(await names('sandbox'), ['trial']);
  assert.deepEqual(((await call(rt.url, 'GET', path, { token: orgKey })).body.sources as Array<{ name: string }>).map((s) => s.name), ['live'], 'production by default');
  for (const [method, json] of [['GET', undefined], ['PATCH', { body_limit_bytes: 2048 }], ['DELETE', undefined]] as const) {
    const crossed = await call(rt.url, method, `${path}/trial`, { token: orgKey, ...(json === undefined ? {} : { json }) });
    assert.equal(crossed.status, 404, `${method} of a sandbox source in the production scope`);
  }
  assert.equal((await call(rt.url, 'GET', `${path}/trial?environment=sandbox`, { token: orgKey })).body.source.body_limit_bytes, 1024 * 1024, 'unchanged');

  // Downgraded to starter: the sandbox source is out of reach like every sandbox read.
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  assert.equal((await call(rt.url, 'GET', `${path}/trial?environment=sandbox`, { token: orgKey })).status, 402);
  assert.equal((await call(rt.url, 'GET', `${path}?environment=sandbox`, { token: orgKey })).status, 402);
});

test('a standard-webhooks secret must be base64 of at least 24 bytes', async () => {
  const short = await call(rt.url, 'POST', base, { token: key, json: { name: 'short', secrets: [`whsec_${Buffer.alloc(16).toString('base64')}`] } });
  assert.equal(short.status, 400);
  assert.equal(short.body.error.code, 'secret_too_short');
  assert.equal(short.body.error.field, 'secrets[0]');
  // A password-like text is read as base64 too: the message says so, and how to make a good one.
  const password = await call(rt.url, 'POST', base, { token: key, json: { name: 'password', secrets: ['mysupersecretpasswordthatislong'] } });
  assert.equal(password.body.error.code, 'secret_too_short');
  assert.match(password.body.error.message, /read as base64 .* at least 24 bytes; this one decodes to 23\. Make one with: echo whsec_/);
  const notBase64 = await call(rt.url, 'POST', base, { token: key, json: { name: 'nb64', secrets: [SECRET, 'whsec_***not-base64***'] } });
  assert.equal(notBase64.status, 400);
  assert.equal(notBase64.body.error.field, 'secrets[1]');
  const stripeAnything = await call(rt.url, 'POST', base, { token: key, json: { name: 'stripe', scheme: 'stripe', secrets: ['whsec_any_text'] } });
  assert.equal(stripeAnything.status, 201);
});

test('bad source documents get 400 naming the field', async () => {
  const cases: [unknown, string][] = [
    [{ name: 'Bad Name', secrets: [SECRET] }, 'name'],
    [{ name: 'x', secrets: [] }, 'secrets'],
    [{ name: 'x', secrets: [SECRET], scheme: 'svix' }, 'scheme'],
    [{ name: 'x', secrets: [SECRET], environment: 'prod' }, 'environment'],
    [{ name: 'x', secrets: [SECRET], body_limit_bytes: 10 }, 'body_limit_bytes'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { type: 'nonsense' } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'bad type': {} } }, 'event_types["bad type"]'],
    [{ name: 'x', secrets: [SECRET], event_types: JSON.parse('{"__proto__":{"required":["must"]},"ok.t":{}}') }, 'event_types["__proto__"]'],
    [{ name: 'x' }, 'secrets'],
    // Schemas are self-contained: an `$id` would register in the shared validator, an outside `$ref` could reach another tenant's.
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { $id: 'https://a.example/order', type: 'object' } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { o: { $ref: 'https://a.example/order' } } } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { o: { $id: 'nested', type: 'string' } } } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { o: { type: 'string', pattern: '^(?=a)a$' } } } } }, 'event_types.a.b'],
    // An unknown format would check nothing: a typo must not pass as validation.
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { o: { type: 'string', format: 'emial' } } } } }, 'event_types.a.b'],
    // So would an unknown keyword: a typo, or one of a later draft that draft-07 validation ignores.
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { type: 'object', propertees: { a: { type: 'string' } } } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { o: { type: 'object', requird: ['a'] } } } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { type: 'object', unevaluatedProperties: false } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { type: 'object', dependentRequired: { a: ['b'] } } } }, 'event_types.a.b'],
    // uniqueItems that ajv can only check pair by pair needs a maxItems that bounds the pairs.
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { d: { type: 'array', uniqueItems: true } } } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { properties: { d: { type: 'array', uniqueItems: true, items: { type: 'object' }, maxItems: 101 } } } } }, 'event_types.a.b'],
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { items: { uniqueItems: true, items: { type: ['string', 'array'] } } } } }, 'event_types.a.b'],
    // 64 KiB of UTF-8: 30,000 "€" are 90 KB, though 30,000 characters.
    [{ name: 'x', secrets: [SECRET], event_types: { 'a.b': { description: '€'.repeat(30_000) } } }, 'event_types.a.b'],
  ];
  for (const [json, field] of cases) {
    const answer = await call(rt.url, 'POST', base, { token: key, json });
    assert.equal(answer.status, 400, JSON.stringify(json));
    assert.equal(answer.body.error.field, field, JSON.stringify(json));
    assert.equal(typeof answer.body.error.message, 'string');
  }
});

test('a schema naming another JSON Schema dialect in $schema is refused saying which one is read; draft-07 named or left out is fine', async () => {
  const write = (name: string, $schema: string) => call(rt.url, 'POST', base, { token: key, json: { name, secrets: [SECRET], event_types: { 'a.b': { $schema, type: 'object' } } } });
  const later = await write('dialect-2020', 'https://json-schema.org/draft/2020-12/schema');
  assert.equal(later.status, 400, later.text);
  assert.match(later.body.error.message, /"\$schema" names "https:\/\/json-schema.org\/draft\/2020-12\/schema", but schemas are read as JSON Schema draft-07/);
  assert.equal((await write('dialect-07', 'http://json-schema.org/draft-07/schema#')).status, 201);
});

test('the same schema can be written again and again, and a property named "$id" is just a property', async () => {
  const schema = {
    type: 'object',
    required: ['$id'],
    properties: { $id: { type: 'string' }, kind: { $ref: '#/definitions/kind' }, format: { type: 'string', format: 'email' } },
    definitions: { kind: { enum: ['a', 'b'] } },
    // Annotations may hold anything, a "format" too: ajv never applies them.
    example: { format: 'pdf' },
    'x-vendor': { format: 'v2' },
    title: 'An order', description: 'kept as written', deprecated: false, readOnly: true, nullable: true, $comment: 'a note',
    markdownDescription: 'an **order**', errorMessage: 'not an order', defaultProperties: [], patternErrorMessage: 'like o-123',
  };
  const created = await call(rt.url, 'POST', base, { token: key, json: { name: 'typed-again', secrets: [SECRET], event_types: { 'a.b': schema, 'c.d': schema } } });
  assert.equal(created.status, 201, created.text);
  for (let i = 0; i < 3; i++) {
    const patched = await call(rt.url, 'PATCH', `${base}/typed-again`, { token: key, json: { event_types: { 'a.b': schema } } });
    assert.equal(patched.status, 200, patched.text);
  }
  const refused = await call(rt.url, 'POST', base, { token: key, json: { name: 'with-id', secrets: [SECRET], event_types: { 'a.b': { $id: 'urn:sluice:x', type: 'object' } } } });
  assert.match(refused.body.error.message, /self-contained/);
});

test('uniqueItems is allowed where its check is linear (scalar items) or bounded (maxItems <= 100), and still finds duplicates', async () => {
  const refused = await call(rt.url, 'POST', base, { token: key, json: { name: 'uniq-any', secrets: [SECRET], event_types: { 'a.b': { properties: { d: { uniqueItems: true } } } } } });
  assert.equal(refused.status, 400);
  assert.match(refused.body.error.message, /"uniqueItems" at "\/properties\/d" needs "maxItems" of at most 100\b/);
  const schema = {
    type: 'object',
    properties: {
      ids: { type: 'array', uniqueItems: true, items: { type: ['string', 'integer'] } },
      lines: { type: 'array', uniqueItems: true, items: { type: 'object' }, maxItems: 100 },
    },
  };
  const created = await call(rt.url, 'POST', base, { token: key, json: { name: 'uniq', secrets: [SECRET], event_types: { 'u.t': schema } } });
  assert.equal(created.status, 201, created.text);
  const send = (id: string, payload: object) => {
    const body = JSON.stringify({ type: 'u.t', ...payload });
    return call(rt.url, 'POST', '/hooks/acct-src/uniq', { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) });
  };
  assert.equal((await send('u1', { ids: Array.from({ length: 100_000 }, (_, i) => i) })).status, 204);
  const repeated = await send('u2', { ids: [1, 2, 'x', 2] });
  assert.equal(repeated.status, 422);
  assert.equal(repeated.body.error.field, 'payload.ids');
  assert.equal((await send('u3', { lines: [{ a: 1 }, { a: 1 }] })).status, 422);
  assert.equal((await send('u4', { lines: [{ a: 1 }, { a: 2 }] })).status, 204);
});

test('schemas whose checks could hold the event loop are refused: $refs that expand past the cap or recurse, and patterns with a large RE2 program', async () => {
  const refusal = async (name: string, schema: object): Promise<string> => {
    const answer = await call(rt.url, 'POST', base, { token: key, json: { name, secrets: [SECRET], event_types: { 'x.y': schema } } });
    assert.equal(answer.status, 400, answer.text);
    assert.equal(answer.body.error.code, 'invalid_event_schema');
    assert.equal(answer.body.error.field, 'event_types.x.y');
    return answer.body.error.message;
  };
  // Each definition checks the one before twice: 2^28 subschemas from 2 KB.
  const definitions: Record<string, object> = { d0: { type: 'string' } };
  for (let i = 1; i <= 28; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i - 1}` }, { $ref: `#/definitions/d${i - 1}` }] };
  const doubling = await refusal('doubling', { definitions, properties: { s: { $ref: '#/definitions/d28' } } });
  assert.match(doubling, /more than 20,000 subschemas once its "\$ref"s are followed/);
  const recursive = await refusal('recursive', { definitions: { node: { properties: { left: { $ref: '#/definitions/node' }, right: { $ref: '#/definitions/node' } } } }, $ref: '#/definitions/node' });
  assert.match(recursive, /leads back into itself; recursive schemas are not supported/);
  const pattern = await refusal('repeats', { properties: { s: { type: 'string', pattern: `${'[a-z]{1000}'.repeat(11)}[0-9]` } } });
  assert.match(pattern, /compiles to 11003 RE2 instructions, more than 10,000/);
  const nine = '[a-z]{1000}'.repeat(9);
  // Twelve distinct patterns of 9,002 instructions each (the same pattern twice counts once).
  const properties = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`p${i}`, { type: 'string', pattern: `${nine}${i}` }]));
  const manyPatterns = await refusal('many-patterns', { properties: { again: { type: 'string', pattern: `${nine}0` }, ...properties } });
  assert.match(manyPatterns, /its patterns compile to more than 100,000 RE2 instructions in all \(past it at "\/properties\/p11"\)/);
  const anchored = await refusal('anchored', { definitions: { d: { $anchor: 'd', type: 'string' } }, properties: { s: { $ref: '#d' } } });
  assert.match(anchored, /"\$anchor" at "\/definitions\/d" is not allowed/);
  // A rule kept where no schema goes (an extension key, a default) and referred to would pass by
  // the write-time checks, which walk schema positions only; ajv would still apply it.
  const hidden = await refusal('hidden', { 'x-rules': { type: 'string', pattern: `${'[a-z]{1000}'.repeat(11)}[0-9]` }, properties: { s: { $ref: '#/x-rules' } } });
  assert.match(hidden, /"\$ref": "#\/x-rules" at "\/properties\/s" points into "x-rules", which holds no schema/);
  const inDefault = await refusal('in-default', { default: { format: 'emial' }, properties: { s: { $ref: '#/default' } } });
  assert.match(inDefault, /points into "default", which holds no schema/);
  // ajv ends a pointer at a second "#": this one recurses, though the recursion check read another key.
  const hashed = await refusal('hashed', { definitions: { a: { properties: { l: { $ref: '#/definitions/a#' }, r: { $ref: '#/definitions/a#' } } } }, $ref: '#/definitions/a' });
  assert.match(hashed, /must be "#" or a JSON pointer/);
  // Names every JavaScript object inherits are no members of the schema: ajv's walk found a
  // function there, and the property checked nothing. Names that are not there at all, likewise.
  for (const [name, ref] of [['inherited', '#/definitions/valueOf'], ['inherited-prop', '#/properties/constructor'], ['proto', '#/definitions/__proto__'], ['absent', '#/definitions/missing']]) {
    const nowhere = await refusal(name!, { definitions: {}, required: ['a'], properties: { a: { $ref: ref } } });
    assert.ok(nowhere.includes(`"$ref": "${ref}" at "/properties/a" points to no schema in this one`), nowhere);
  }

  // Shared definitions used a few times, and everyday patterns, are fine.
  const shared = { definitions: { money: { type: 'object', properties: { amount: { type: 'integer' }, currency: { type: 'string', pattern: '^[A-Z]{3}$' } } } }, properties: { total: { $ref: '#/definitions/money' }, tax: { $ref: '#/definitions/money' } } };
  const created = await call(rt.url, 'POST', base, { token: key, json: { name: 'shared-defs', secrets: [SECRET], event_types: { 'x.y': shared } } });
  assert.equal(created.status, 201, created.text);
  const body = JSON.stringify({ type: 'x.y', total: { amount: 5, currency: 'eur' } });
  const refused = await call(rt.url, 'POST', '/hooks/acct-src/shared-defs', { body, headers: signStandard(SECRET, 'shared-1', Math.floor(Date.now() / 1000), body) });
  assert.equal(refused.status, 422, 'the shared definition still checks');
  assert.equal(refused.body.error.field, 'payload.total.currency');
});

test('an async schema is refused (it would pass every payload, and throw for a bad one), and inherited members are not payload fields', async () => {
  const refused = await call(rt.url, 'POST', base, { token: key, json: { name: 'async', secrets: [SECRET], event_types: { 'o.c': { $async: true, type: 'object', required: ['must'] } } } });
  assert.equal(refused.status, 400, refused.text);
  assert.match(refused.body.error.message, /"\$async" at "\/" is not allowed/);
  const schema = { type: 'object', properties: { driver: { type: 'string' }, constructor: { type: 'string' } }, required: ['driver'] };
  const created = await call(rt.url, 'POST', base, { token: key, json: { name: 'laps', secrets: [SECRET], event_types: { lap: schema, 'lap.strict': { type: 'object', required: ['valueOf'] } } } });
  assert.equal(created.status, 201, created.text);
  const send = (id: string, payload: object) => {
    const body = JSON.stringify(payload);
    return call(rt.url, 'POST', '/hooks/acct-src/laps', { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) });
  };
  assert.equal((await send('lap-1', { type: 'lap', driver: 'Max' })).status, 204, 'an absent optional "constructor" is absent');
  const missing = await send('lap-2', { type: 'lap.strict' });
  assert.equal(missing.status, 422, 'a required "valueOf" is not found on Object.prototype');
  assert.equal(missing.body.error.field, 'payload.valueOf');
});

test('a payload whose check would take seconds is refused at the deadline (422), and the runtime answers others meanwhile', async () => {
  // Within every write-time cap; its check costs items x branches.
  const costly = { type: 'object', properties: { a: { type: 'array', items: { anyOf: Array.from({ length: 1500 }, (_, i) => ({ const: `v${i}` })) } } } };
  const created = await call(rt.url, 'POST', base, { token: key, json: { name: 'costly', secrets: [SECRET], event_types: { 'c.x': costly } } });
  assert.equal(created.status, 201, created.text);
  const body = JSON.stringify({ type: 'c.x', a: Array.from({ length: 20_000 }, () => 'v1499') });
  let hookAnswered = false;
  const hook = call(rt.url, 'POST', '/hooks/acct-src/costly', { body, headers: signStandard(SECRET, 'costly-1', Math.floor(Date.now() / 1000), body) }).then((answer) => {
    hookAnswered = true;
    return answer;
  });
  // Asked while the hook's check runs (1 s, to its deadline). The runtime shares this process: on
  // the event loop the check would hold back this test and the answer, and the hook's would come first.
  await eventually('the check under way', () => rt.runtime.context.schemas.payloads.running, (running) => running);
  assert.equal((await call(rt.url, 'GET', '/healthz')).status, 200);
  assert.equal(hookAnswered, false, '/healthz was answered while the check ran');
  const refused = await hook;
  assert.equal(refused.status, 422, refused.text);
  assert.equal(refused.body.error.code, 'schema_check_too_slow');
  const stored = await call(rt.url, 'GET', '/organizations/acct-src/events?type=c.x', { token: key });
  assert.deepEqual(stored.body.events, [], 'nothing was stored');
});

test('a write with many schemas compiles them off the event loop: the runtime answers others meanwhile', async () => {
  const eventTypes = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`t.${i}`, { type: 'object', properties: Object.fromEntries(Array.from({ length: 120 }, (_, j) => [`p${j}`, { type: 'string', minLength: 1, maxLength: 64 }])) }]));
  let writeAnswered = false;
  const writing = call(rt.url, 'POST', base, { token: key, json: { name: 'many-schemas', secrets: [SECRET], event_types: eventTypes } }).then((answer) => {
    writeAnswered = true;
    return answer;
  });
  // Compiling these takes seconds (2.4 s on the event loop here): /healthz is answered meanwhile.
  await eventually('the compile under way', () => rt.runtime.context.schemas.writes.running, (running) => running);
  assert.equal((await call(rt.url, 'GET', '/healthz')).status, 200);
  assert.equal(writeAnswered, false, '/healthz was answered while the write compiled');
  const written = await writing;
  assert.equal(written.status, 201, written.text);
});

test('viewers cannot create sources', async () => {
  const viewer = await call(rt.url, 'POST', '/organizations/acct-src/api-keys', { token: key, json: { role: 'viewer' } });
  const denied = await call(rt.url, 'POST', base, { token: viewer.body.key, json: { name: 'v', secrets: [SECRET] } });
  assert.equal(denied.status, 403);
  assert.equal((await call(rt.url, 'GET', base, { token: viewer.body.key })).status, 200);
});

test('an org holds at most 200 sources; deleting one makes room', async () => {
  const org = 'acct-src-cap';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const { sources } = rt.runtime.context;
  const now = new Date().toISOString();
  for (let i = 1; i < MAX_SOURCES_PER_ORG; i++) {
    await sources.create({ org_id: org, name: `s${i}`, scheme: 'standard-webhooks', secrets: [SECRET], environment: 'production', event_types: {}, body_limit_bytes: 1024, created_at: now, updated_at: now });
  }
  const path = `/organizations/${org}/sources`;
  assert.equal((await call(rt.url, 'POST', path, { token: orgKey, json: { name: 'last', secrets: [SECRET] } })).status, 201, 'the 200th');
  const over = await call(rt.url, 'POST', path, { token: orgKey, json: { name: 'one-more', secrets: [SECRET] } });
  assert.equal(over.status, 409);
  assert.equal(over.body.error.code, 'source_limit_reached');
  assert.equal((await call(rt.url, 'DELETE', `${path}/s1`, { token: orgKey })).status, 204);
  assert.equal((await call(rt.url, 'POST', path, { token: orgKey, json: { name: 'one-more', secrets: [SECRET] } })).status, 201);
});
