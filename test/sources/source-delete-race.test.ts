// Deliveries racing the delete of their source: whatever was acknowledged, a source created again
// under that name accepts every one of those ids as new (the README's promise for a delete). A
// delivery checked after the delete began used to store a dedup claim behind it, and the new
// source answered 409 for its id for the whole dedup window.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-source-race';
const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

const createSource = async (): Promise<void> => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'payments', secrets: [SECRET] } });
  assert.equal(created.status, 201, created.text);
};

const deliver = (id: string) => {
  const body = JSON.stringify({ type: 'payment.succeeded', id });
  return call(rt.url, 'POST', `/hooks/${ORG}/payments`, { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) });
};

test('ids acknowledged while their source was being deleted are new to a source created again under its name', async () => {
  for (let round = 0; round < 5; round += 1) {
    await createSource();
    const ids = Array.from({ length: 100 }, (_, i) => `r${round}-${i}`);
    const answers = ids.map((id, i) => new Promise<{ id: string; status: number }>((resolve, reject) => {
      // Spread over the delete: some before it is sent, some while it is under way.
      setTimeout(() => deliver(id).then((answer) => resolve({ id, status: answer.status }), reject), i % 25);
    }));
    const deleted = new Promise<number>((resolve, reject) => setTimeout(() => call(rt.url, 'DELETE', `/organizations/${ORG}/sources/payments`, { token: key }).then((answer) => resolve(answer.status), reject), 8));
    assert.equal(await deleted, 204);
    const settled = await Promise.all(answers);
    for (const { status } of settled) assert.ok(status === 204 || status === 404, `a delivery is stored or finds no source: ${status}`);
    const acknowledged = settled.filter((answer) => answer.status === 204).map((answer) => answer.id);

    await createSource();
    for (const id of acknowledged) assert.equal((await deliver(id)).status, 204, `round ${round}: ${id} is new to the new source`);
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/sources/payments`, { token: key })).status, 204);
  }
});
