// A key revoked while its write is on its way (its schemas compiling in the thread, which can take
// seconds behind other orgs' compiles, its module in the hook-runner, or a custom action secret's
// write waiting behind another write of that secret) writes nothing: the request is 401 once the wait is over, as
// an API event that waited out a sandbox reset is; so is a large API event whose body waited its turn in
// the reading thread, and a sandbox reset that waited for one in flight. The wait is held by a gate, so the
// revocation lands inside the wait every time.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { KeyedSerial } from '../../runtime/keyed-serial.ts';
import { keyWithRole, upload } from '../actions/action-fixtures.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { call, createOrg, type CallResult } from '../helpers/http.ts';
import { gateNextCall, whileCallHeld } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-revoked-mid-write';
let rt: TestRuntime;
let admin: string;
before(async () => {
  rt = await startRuntime();
  admin = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

const newDeveloperKey = async (): Promise<{ id: string; key: string }> => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: admin, json: { role: 'developer' } });
  assert.equal(created.status, 201, created.text);
  return { id: created.body.id, key: created.body.key };
};

/** Counts the writes queued behind one another (KeyedSerial.run calls) from now until `restore`. */
function countQueuedWrites(): { count: number; restore: () => void } {
  const serial = KeyedSerial.prototype as unknown as { run: (...args: unknown[]) => Promise<unknown> };
  const { run } = serial;
  const counter = {
    count: 0,
    restore: () => {
      serial.run = run;
    },
  };
  serial.run = function (this: unknown, ...args: unknown[]) {
    counter.count++;
    return run.apply(this, args);
  };
  return counter;
}

test('a write of a key whose revocation is being saved is 401 and writes nothing; the revocation then answers', async () => {
  const { id, key } = await newDeveloperKey();
  // The revocation is held before its own write is queued: a write of the key checked meanwhile
  // was let through (it committed beside the revocation and answered after its 200).
  const held = gateNextCall(rt.runtime.ledger.root, 'transaction');
  const revoking = call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${id}`, { token: admin });
  await whileCallHeld(held, revoking, 'the revocation', async () => {
    const minted = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'while-revoking', secrets: ['whsec_' + Buffer.alloc(32, 6).toString('base64')] } });
    assert.equal(minted.status, 401, minted.text);
    assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/sources`, { token: key })).status, 401, 'reads are refused too');
  });
  assert.equal((await revoking).status, 200);
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/sources/while-revoking`, { token: admin })).status, 404, 'nothing was written');
});

for (const [what, path, body] of [
  ['a source create', 'sources', { name: 'after-revocation-source', secrets: ['whsec_' + Buffer.alloc(32, 7).toString('base64')] }],
  ['a device create', 'devices', { name: 'after-revocation-device' }],
] as const) {
  test(`${what} whose key is revoked while it waits to write (a deleted namesake's claims forgotten first) is 401 and writes nothing`, async () => {
    const { id, key } = await newDeveloperKey();
    // The create's first write forgets the claims a deleted namesake left; its own insert comes
    // after that commits. Held there, past its checks, while the key is revoked.
    const held = gateNextCall(rt.runtime.ledger.root, 'transaction');
    const creating = call(rt.url, 'POST', `/organizations/${ORG}/${path}`, { token: key, json: body });
    await whileCallHeld(held, creating, 'the create', async () => {
      assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${id}`, { token: admin })).status, 200);
    });
    const created = await creating;
    assert.equal(created.status, 401, created.text);
    assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/${path}/${body.name}`, { token: admin })).status, 404, 'nothing was written');
  });
}

const schemas = { event_types: { 'pay.ok': { type: 'object' } } };
for (const [what, write, read] of [
  ['a source create', (key: string) => call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'late-source', secrets: ['whsec_' + Buffer.alloc(32, 3).toString('base64')], ...schemas } }), `/organizations/${ORG}/sources/late-source`],
  ['a device create', (key: string) => call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'late-device', ...schemas } }), `/organizations/${ORG}/devices/late-device`],
  ['a source update', async (key: string) => {
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: admin, json: { name: 'kept', secrets: ['whsec_' + Buffer.alloc(32, 4).toString('base64')] } })).status, 201);
    return call(rt.url, 'PATCH', `/organizations/${ORG}/sources/kept`, { token: key, json: { secrets: ['whsec_' + Buffer.alloc(32, 5).toString('base64')], ...schemas } });
  }, `/organizations/${ORG}/sources/kept`],
] as const) {
  test(`${what} whose key is revoked while its schemas compile is 401 and writes nothing`, async () => {
    const { id, key } = await newDeveloperKey();
    const held = gateNextCall(rt.runtime.context.schemas.writes, 'compile');
    const answer = write(key);
    await whileCallHeld(held, answer, 'the write', async () => {
      assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${id}`, { token: admin })).status, 200);
    });
    const refused = await answer;
    assert.deepEqual([refused.status, refused.body.error?.code], [401, 'unauthorized'], refused.text);
    const after = await call(rt.url, 'GET', read, { token: admin });
    if (what === 'a source update') assert.deepEqual(after.body.source.event_types, {}, 'the schemas were not written');
    else assert.equal(after.status, 404, 'nothing was made');
  });
}

test('a custom action upload whose key is revoked while the hook-runner compiles it is 401 and makes no action', async () => {
  const withRunner = await startRuntime({ args: ['--runner', 'child'] });
  const proto = HookRunnerClient.prototype as unknown as { compile: (...args: unknown[]) => Promise<string> };
  const original = proto.compile;
  try {
    const org = 'acct-revoked-upload';
    const orgAdmin = await createOrg(withRunner.url, ADMIN_TOKEN, org);
    const { key, id } = await keyWithRole(withRunner.url, org, orgAdmin, 'developer');
    const held = gateNextCall(proto, 'compile');
    const answer = upload(withRunner.url, `/organizations/${org}/custom-actions`, key, { name: 'late-action', file: await assembleWat('echo', ECHO_WAT) });
    await whileCallHeld(held, answer, 'the upload', async () => {
      assert.equal((await call(withRunner.url, 'DELETE', `/organizations/${org}/api-keys/${id}`, { token: orgAdmin })).status, 200);
    });
    const refused = await answer;
    assert.deepEqual([refused.status, refused.body.error?.code], [401, 'unauthorized'], refused.text);
    assert.deepEqual((await call(withRunner.url, 'GET', `/organizations/${org}/custom-actions`, { token: orgAdmin })).body.custom_actions, [], 'no action was made');
  } finally {
    proto.compile = original;
    await withRunner.close();
  }
});

for (const change of ['set', 'delete'] as const) {
  test(`a custom action secret ${change} whose key is revoked while it waits behind another write of the secret is 401 and changes nothing`, async () => {
    const withRunner = await startRuntime({ args: ['--runner', 'child'] });
    const runnerProto = HookRunnerClient.prototype as unknown as { putSecret: (...args: unknown[]) => Promise<unknown> };
    const queue = countQueuedWrites();
    try {
      const org = `acct-revoked-secret-${change}`;
      const orgAdmin = await createOrg(withRunner.url, ADMIN_TOKEN, org);
      const { key, id } = await keyWithRole(withRunner.url, org, orgAdmin, 'developer');
      const made = await upload(withRunner.url, `/organizations/${org}/custom-actions`, orgAdmin, { name: 'keeper', file: await assembleWat('echo', ECHO_WAT) });
      assert.equal(made.status, 201, made.text);
      const secrets = `/organizations/${org}/custom-actions/${made.body.custom_action.id}/secrets`;
      assert.equal((await call(withRunner.url, 'POST', secrets, { token: orgAdmin, json: { key: 'API_KEY', value: 'first' } })).status, 204);
      // The admin's write of the same secret holds the line at the runner.
      const held = gateNextCall(runnerProto, 'putSecret');
      queue.count = 0;
      const first = call(withRunner.url, 'POST', secrets, { token: orgAdmin, json: { key: 'API_KEY', value: 'second' } });
      let answer: Promise<CallResult> | undefined;
      await whileCallHeld(held, first, 'the first write', async () => {
        answer = change === 'set' ? call(withRunner.url, 'POST', secrets, { token: key, json: { key: 'API_KEY', value: 'by-revoked' } }) : call(withRunner.url, 'DELETE', `${secrets}/API_KEY`, { token: key });
        await eventually('the developer write queued behind it', () => queue.count, (n) => n === 2);
        assert.equal((await call(withRunner.url, 'DELETE', `/organizations/${org}/api-keys/${id}`, { token: orgAdmin })).status, 200);
      });
      assert.equal((await first).status, 204);
      const refused = await answer!;
      assert.deepEqual([refused.status, refused.body.error?.code], [401, 'unauthorized'], refused.text);
      assert.deepEqual((await call(withRunner.url, 'GET', secrets, { token: orgAdmin })).body.keys, ['API_KEY'], 'the secret is still there');
    } finally {
      queue.restore();
      await withRunner.close();
    }
  });
}

test('a workflow update whose key is revoked while it waits behind another write of the workflow is 401 and makes no version', async () => {
  const queue = countQueuedWrites();
  try {
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: admin, json: { name: 'kept-name', trigger_event: 'order.paid', steps: [{ type: 'webhook', url: 'https://example.com/hook' }] } });
    assert.equal(made.status, 201, made.text);
    const path = `/organizations/${ORG}/workflows/${made.body.workflow.id}`;
    const { id, key } = await newDeveloperKey();
    // The admin's toggle holds the line inside the workflow's write.
    const held = gateNextCall(rt.runtime.workflows, 'setStatus');
    queue.count = 0;
    const toggle = call(rt.url, 'POST', `${path}/toggle`, { token: admin, json: { action: 'disable' } });
    let update: Promise<CallResult> | undefined;
    await whileCallHeld(held, toggle, 'the toggle', async () => {
      update = call(rt.url, 'PATCH', path, { token: key, json: { name: 'by-revoked-key' } });
      await eventually('the update queued behind it', () => queue.count, (n) => n === 2);
      assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${id}`, { token: admin })).status, 200);
    });
    assert.equal((await toggle).status, 200);
    const refused = await update!;
    assert.deepEqual([refused.status, refused.body.error?.code], [401, 'unauthorized'], refused.text);
    const now = await call(rt.url, 'GET', path, { token: admin });
    assert.deepEqual([now.body.workflow.name, now.body.workflow.status], ['kept-name', 'disabled']);
  } finally {
    queue.restore();
  }
});

test('an API event whose large body waits its turn in the reading thread while its key is revoked is 401 and stores nothing', async () => {
  const { id, key } = await newDeveloperKey();
  const held = gateNextCall(rt.runtime.context.schemas.bodies, 'readApiBody');
  // 64 KiB or more: read in the thread (THREAD_READ_BYTES), in turn with the org's large webhooks.
  const answer = call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'late.large', payload: { blob: 'x'.repeat(70 * 1024) } } });
  await whileCallHeld(held, answer, 'the event', async () => {
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${id}`, { token: admin })).status, 200);
  });
  const refused = await answer;
  assert.deepEqual([refused.status, refused.body.error?.code], [401, 'unauthorized'], refused.text);
  assert.deepEqual((await call(rt.url, 'GET', `/organizations/${ORG}/events?type=late.large`, { token: admin })).body.events, [], 'no event was stored');
});

for (const change of ['its key is revoked', 'the plan moves to starter'] as const) {
  test(`a sandbox reset that waits to start while ${change} is refused and removes nothing`, async () => {
    const org = `acct-late-reset-${change === 'its key is revoked' ? 'key' : 'plan'}`;
    const orgAdmin = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
    const created = await call(rt.url, 'POST', `/organizations/${org}/api-keys`, { token: orgAdmin, json: { role: 'developer' } });
    const kept = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: orgAdmin, json: { type: 'kept.sandbox', payload: {}, environment: 'sandbox' } });
    assert.equal(kept.status, 202, kept.text);
    // Held where a reset waits for one of the org's in flight (sandbox-generation.ts `during`).
    const held = gateNextCall(rt.runtime.context.runs.sandboxGenerations, 'during');
    const answer = call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: created.body.key });
    await whileCallHeld(held, answer, 'the reset', async () => {
      const changed = change === 'its key is revoked'
        ? await call(rt.url, 'DELETE', `/organizations/${org}/api-keys/${created.body.id}`, { token: orgAdmin })
        : await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } });
      assert.equal(changed.status, 200, changed.text);
    });
    const refused = await answer;
    assert.deepEqual([refused.status, refused.body.error?.code], change === 'its key is revoked' ? [401, 'unauthorized'] : [402, 'sandbox_disabled'], refused.text);
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
    const still = await call(rt.url, 'GET', `/organizations/${org}/events/${kept.body.event.id}?environment=sandbox`, { token: orgAdmin });
    assert.equal(still.status, 200, `the sandbox event is still there: ${still.text}`);
  });
}
