// A runtime started without a hook-runner (`--runner off`): custom action metadata stays readable and
// reviewable, while uploads, secrets and simulate answer 503 hook_runner_unavailable with what to do.

import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CustomActionStore } from '../../runtime/actions/custom-action-store.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { upload } from './action-fixtures.ts';

const ORG = 'acct-no-runner';
const base = `/organizations/${ORG}/custom-actions`;
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime({ args: ['--runner', 'off'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => rt.close());

const expect503 = (answer: { status: number; body: any }, what: string): void => {
  assert.equal(answer.status, 503, what);
  assert.equal(answer.body.error.code, 'hook_runner_unavailable', what);
  assert.match(answer.body.error.message, /sluice dev|--runner/, what);
};

it('uploads, secrets and simulate answer 503; reads and reviews still work', async () => {
  expect503(await upload(rt.url, base, key, { name: 'x', file: new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]) }), 'upload');

  // An action written while a runner was configured (straight into this runtime's ledger).
  const store = new CustomActionStore(rt.runtime.ledger);
  const action = await store.create(ORG, { name: 'earlier', description: '', module: { digest: 'd'.repeat(64), size: 8 }, permissions: [] }, Date.now());
  const one = `${base}/${action.id}`;
  expect503(await upload(rt.url, `${one}/versions`, key, { file: new Uint8Array([1]) }), 'new version');
  expect503(await call(rt.url, 'POST', `${one}/secrets`, { token: key, json: { key: 'A', value: 'v' } }), 'put secret');
  expect503(await call(rt.url, 'GET', `${one}/secrets`, { token: key }), 'list secrets');
  expect503(await call(rt.url, 'DELETE', `${one}/secrets/A`, { token: key }), 'delete secret');
  expect503(await call(rt.url, 'POST', `${one}/simulate`, { token: key, json: { payload: {} } }), 'simulate');

  assert.equal((await call(rt.url, 'GET', one, { token: key })).status, 200);
  const approved = await call(rt.url, 'POST', `${one}/review`, { token: key, json: { status: 'approved', version: 1 } });
  assert.equal(approved.status, 200, approved.text);
  assert.equal(store.resolveForRun(ORG, action.id).kind, 'approved');
});
