// Source and organization updates merge onto the record as stored when their write runs: two
// concurrent PATCHes both land (a secret rotation is never undone by a schema change), a PATCH never
// brings back a deleted source, and a deleted source takes its dedup claims with it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';

const ORG = 'acct-source-races';
const OLD = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const NEW = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
const base = `/organizations/${ORG}/sources`;
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

const hook = (name: string, secret: string, id: string) => {
  const body = JSON.stringify({ type: 'order.paid', id });
  return call(rt.url, 'POST', `/hooks/${ORG}/${name}`, { body, headers: signStandard(secret, id, Math.floor(Date.now() / 1000), body) });
};

test('a secret rotation and a schema change sent together both land', async () => {
  for (let round = 0; round < 5; round++) {
    const name = `pay-${round}`;
    assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name, secrets: [OLD] } })).status, 201);
    const answers = await Promise.all([
      call(rt.url, 'PATCH', `${base}/${name}`, { token: key, json: { secrets: [NEW] } }),
      call(rt.url, 'PATCH', `${base}/${name}`, { token: key, json: { event_types: { 'order.paid': { type: 'object' } } } }),
    ]);
    assert.deepEqual(answers.map((a) => a.status), [200, 200]);
    const source = (await call(rt.url, 'GET', `${base}/${name}`, { token: key })).body.source;
    assert.deepEqual(Object.keys(source.event_types), ['order.paid'], `round ${round}: the schema change kept`);
    assert.equal((await hook(name, OLD, `msg-old-${round}`)).status, 401, `round ${round}: the retired secret stays retired`);
    assert.equal((await hook(name, NEW, `msg-new-${round}`)).status, 204);
  }
});

test('a PATCH racing a DELETE never brings the source back', async () => {
  for (let round = 0; round < 5; round++) {
    const name = `gone-${round}`;
    assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name, secrets: [OLD] } })).status, 201);
    const [patched, deleted] = await Promise.all([
      call(rt.url, 'PATCH', `${base}/${name}`, { token: key, json: { body_limit_bytes: 2048 } }),
      call(rt.url, 'DELETE', `${base}/${name}`, { token: key }),
    ]);
    assert.equal(deleted.status, 204);
    assert.ok([200, 404].includes(patched.status), String(patched.status));
    assert.equal((await call(rt.url, 'GET', `${base}/${name}`, { token: key })).status, 404, `round ${round}`);
  }
});

test('a deleted source forgets its delivery ids: a source made later under its name (here in the other environment) accepts them', async () => {
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'payments', secrets: [OLD], environment: 'sandbox' } })).status, 201);
  const first = await hook('payments', OLD, 'msg_1');
  assert.equal(first.status, 204, first.text);
  assert.equal((await hook('payments', OLD, 'msg_1')).status, 409, 'a duplicate while the source exists');
  assert.equal((await call(rt.url, 'DELETE', `${base}/payments?environment=sandbox`, { token: key })).status, 204);
  assert.equal((await call(rt.url, 'POST', base, { token: key, json: { name: 'payments', secrets: [OLD] } })).status, 201);
  const again = await hook('payments', OLD, 'msg_1');
  assert.equal(again.status, 204, again.text);
});

test('two organization PATCHes sent together both land', async () => {
  for (let round = 0; round < 5; round++) {
    const answers = await Promise.all([
      call(rt.url, 'PATCH', `/organizations/${ORG}`, { token: ADMIN_TOKEN, json: { name: `Renamed ${round}` } }),
      call(rt.url, 'PATCH', `/organizations/${ORG}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 10 + round } }),
    ]);
    assert.deepEqual(answers.map((a) => a.status), [200, 200]);
    const org = (await call(rt.url, 'GET', `/organizations/${ORG}`, { token: key })).body.organization;
    assert.deepEqual([org.name, org.max_concurrent_runs], [`Renamed ${round}`, 10 + round], `round ${round}`);
  }
});
