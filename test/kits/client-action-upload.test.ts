// The client kit uploads custom action modules (multipart) to a real runtime with its hook-runner
// child: a new action and a new version of it, each compiled by Wasmtime and pending review; a
// module the runner refuses rejects with Sluice's own error, and an upload is never retried.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SluiceApiError, SluiceArgumentError, SluiceClient, uploadAction, uploadActionVersion } from '../../kits/client/index.ts';
import { startActionRuntime, type ActionModules } from '../actions/action-fixtures.ts';
import { call } from '../helpers/http.ts';
import type { TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-client-upload';
let rt: TestRuntime;
let key: string;
let modules: ActionModules;
before(async () => {
  ({ rt, key, modules } = await startActionRuntime(ORG));
});
after(() => rt.close());

test('an action and a new version uploaded from a program: compiled, pending review, readable through the API', { timeout: 60_000 }, async () => {
  const client = new SluiceClient({ url: rt.url, apiKey: key, org: ORG });
  const made = await uploadAction(client, { name: 'echo', wasm: modules.echo, description: 'echoes', permissions: ['read_secret:TOKEN'] });
  const id = made.custom_action.id;
  assert.equal(made.custom_action.name, 'echo');
  const versioned = await uploadActionVersion(client, id, modules.projection);
  assert.equal(versioned.custom_action.id, id);
  const read = await call(rt.url, 'GET', `/organizations/${ORG}/custom-actions/${id}`, { token: key });
  assert.equal(read.status, 200, read.text);
  const versions = read.body.custom_action.versions as Array<{ version: number; status: string; permissions: string[] }>;
  assert.deepEqual(versions.map((version) => [version.version, version.status]), [[1, 'pending_review'], [2, 'pending_review']], read.text);
  assert.deepEqual(read.body.custom_action.description, 'echoes');
});

test('a module the runner refuses rejects with Sluice\'s error; an id that names no action is refused before sending', { timeout: 60_000 }, async () => {
  const client = new SluiceClient({ url: rt.url, apiKey: key, org: ORG });
  await assert.rejects(uploadAction(client, { name: 'wasi', wasm: modules.withImport }), (error: unknown) => error instanceof SluiceApiError && error.status === 400 && /import/i.test(error.message));
  await assert.rejects(uploadActionVersion(client, '..', modules.echo), SluiceArgumentError);
});
