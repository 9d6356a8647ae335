// Writes whose answer holds a secret shown once (a new API key, a rotated device token, a new org's
// first admin key, a new device's token) refuse an Idempotency-Key with 400
// idempotency_key_not_supported, making nothing: Sluice keeps such secrets only hashed and cannot
// answer them twice, and ignoring the key (as it did) let each retry of a lost answer mint another
// live credential nobody saw (found by idempotency probes, helpers).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-unkeyed-secrets';
let rt: TestRuntime;
let admin: string;

before(async () => {
  rt = await startRuntime();
  admin = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

const keyed = { 'idempotency-key': 'retry-me-1' };

test('an API key create with an Idempotency-Key is 400 and makes no key; without one it makes one', async () => {
  const listed = async (): Promise<number> => (await call(rt.url, 'GET', `/organizations/${ORG}/api-keys?limit=500`, { token: admin })).body.api_keys.length;
  const before = await listed();
  const refused = await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: admin, json: { role: 'viewer' }, headers: keyed });
  assert.deepEqual([refused.status, refused.body.error?.code, refused.body.error?.field], [400, 'idempotency_key_not_supported', 'Idempotency-Key'], refused.text);
  assert.match(refused.body.error.message, /list the keys/);
  assert.equal(await listed(), before, 'no key was made');
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: admin, json: { role: 'viewer' } })).status, 201);
  assert.equal(await listed(), before + 1);
});

test('a device token rotation with an Idempotency-Key is 400 and leaves the token as it was', async () => {
  const made = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: admin, json: { name: 'meter-1' } });
  assert.equal(made.status, 201, made.text);
  const refused = await call(rt.url, 'POST', `/organizations/${ORG}/devices/meter-1/token`, { token: admin, headers: keyed });
  assert.deepEqual([refused.status, refused.body.error?.code], [400, 'idempotency_key_not_supported'], refused.text);
  const now = await call(rt.url, 'GET', `/organizations/${ORG}/devices/meter-1`, { token: admin });
  assert.equal(now.body.device.token_prefix, made.body.device.token_prefix, 'the token was not rotated');
  const rotated = await call(rt.url, 'POST', `/organizations/${ORG}/devices/meter-1/token`, { token: admin });
  assert.equal(rotated.status, 200, rotated.text);
  assert.notEqual(rotated.body.device.token_prefix, made.body.device.token_prefix);
});

test('an org create and a device create with an Idempotency-Key are 400 and make nothing: their answers hold a key and a token shown once', async () => {
  const org = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'acct-keyed-create', name: 'Keyed' }, headers: keyed });
  assert.deepEqual([org.status, org.body.error?.code], [400, 'idempotency_key_not_supported'], org.text);
  assert.match(org.body.error.message, /organization_exists/);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-keyed-create', { token: ADMIN_TOKEN })).status, 404, 'no org was made');
  // The caller first: a viewer with a key is 403, as without one.
  const viewer = (await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: admin, json: { role: 'viewer' } })).body.key as string;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: viewer, json: { name: 'meter-keyed' }, headers: keyed })).status, 403);
  const device = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: admin, json: { name: 'meter-keyed' }, headers: keyed });
  assert.deepEqual([device.status, device.body.error?.code], [400, 'idempotency_key_not_supported'], device.text);
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/devices/meter-keyed`, { token: admin })).status, 404, 'no device was made');
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: admin, json: { name: 'meter-keyed' } })).status, 201, 'without the key it is made');
});
