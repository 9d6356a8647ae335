// The custom action store on every ledger (LMDB and memory): versions, review transitions, and what resolveForRun lets a
// run execute (only the approved version, with the permissions as reviewed).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CustomActionId } from '../../runtime/actions/custom-action-record.ts';
import { CustomActionStore, MAX_VERSIONS_PER_ACTION } from '../../runtime/actions/custom-action-store.ts';
import { newestFirst } from '../../runtime/api/sorted-page.ts';
import { ConflictError, SluiceError } from '../../runtime/errors.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const DIGEST_A = 'a'.repeat(64);
const DIGEST_B = 'b'.repeat(64);
const DIGEST_C = 'c'.repeat(64);
const AT = Date.UTC(2025, 0, 1);
const ORG = 'acct-store';

let store: CustomActionStore;

const create = (permissions: string[] = [], digest = DIGEST_A) =>
  store.create(ORG, { name: 'scorer', description: '', module: { digest, size: 100, bytes: new Uint8Array(100) }, permissions }, AT);

async function rejects(promise: Promise<unknown>, status: number, code: string): Promise<SluiceError> {
  const error = await promise.then(() => assert.fail('expected a rejection'), (caught: unknown) => caught);
  assert.ok(error instanceof SluiceError, String(error));
  assert.equal(error.status, status);
  assert.equal(error.code, code);
  return error;
}

for (const kind of LEDGER_KINDS) describe(`custom action store (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  before(() => {
    opened = kind.open();
    store = new CustomActionStore(opened.ledger);
  });
  after(() => opened.close());

  it('creates version 1 pending review; a run may not use it yet', async () => {
    const action = await create(['read_secret:API_KEY']);
    assert.match(action.id, /^act_[0-9a-f]{16}$/);
    assert.equal(action.approved_version, null);
    assert.equal(action.latest_version, 1);
    assert.deepEqual(action.versions.map((v) => [v.version, v.status, v.digest, v.reviewer]), [[1, 'pending_review', DIGEST_A, null]]);
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'not_approved', status: 'pending_review' });
    assert.deepEqual(store.resolveForRun(ORG, 'act_0000000000000000'), { kind: 'missing' });
    assert.deepEqual(store.resolveForRun('another-org', action.id), { kind: 'missing' }, 'keys start with the org');
    assert.deepEqual(store.resolveForRun(ORG, 'not-an-id'), { kind: 'missing' });
  });

  it('a rejected only version resolves as rejected; the review is recorded', async () => {
    const action = await create();
    const { version } = await store.review(ORG, action.id, { decision: 'rejected', reason: 'calls out too much', reviewer: 'key_admin' }, AT + 1);
    assert.equal(version?.status, 'rejected');
    assert.equal(version?.reviewer, 'key_admin');
    assert.equal(version?.reason, 'calls out too much');
    assert.equal(version?.reviewed_at, new Date(AT + 1).toISOString());
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'not_approved', status: 'rejected' });
    await rejects(store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin', version: 1 }, AT), 409, 'version_not_pending');
    await rejects(store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin' }, AT), 409, 'no_pending_version');
    await rejects(store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin', version: 9 }, AT), 404, 'not_found');
  });

  it('the approved version keeps running while a newer one waits; approving moves forward and supersedes', async () => {
    const action = await create(['read_secret:A']);
    await store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin' }, AT);
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'approved', version: 1, digest: DIGEST_A, permissions: ['read_secret:A'] });

    const v2 = await store.addVersion(ORG, action.id, { module: { digest: DIGEST_B, size: 200, bytes: new Uint8Array(200) } }, AT);
    assert.equal(v2.version?.version, 2);
    assert.deepEqual(v2.version?.permissions, ['read_secret:A'], 'omitted permissions carry over, to be reviewed again');
    const v3 = await store.addVersion(ORG, action.id, { module: { digest: DIGEST_C, size: 300, bytes: new Uint8Array(300) }, permissions: [], name: 'scorer v3' }, AT);
    assert.equal(v3.action.name, 'scorer v3');
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'approved', version: 1, digest: DIGEST_A, permissions: ['read_secret:A'] });

    // Default target: the newest pending version. Version 2 (older, still pending) is superseded with version 1.
    const approved = await store.review(ORG, action.id, { decision: 'approved', reason: 'ok', reviewer: 'key_admin' }, AT);
    assert.equal(approved.version?.version, 3);
    assert.equal(approved.action.approved_version, 3);
    assert.deepEqual(approved.action.versions.map((v) => v.status), ['superseded', 'superseded', 'approved']);
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'approved', version: 3, digest: DIGEST_C, permissions: [] });
    const error = await rejects(store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin', version: 2 }, AT), 409, 'version_not_pending');
    assert.ok(error instanceof ConflictError);
    assert.deepEqual(error.details, { version: 2, status: 'superseded' });
  });

  it('a permissions edit is a new pending version of the same module; the approval keeps what was reviewed', async () => {
    const action = await create(['read_secret:A']);
    await store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin' }, AT);
    const widened = await store.update(ORG, action.id, { permissions: ['read_secret:A', 'read_secret:B'], description: 'now reads B' }, AT);
    assert.equal(widened.version?.version, 2);
    assert.equal(widened.version?.digest, DIGEST_A);
    assert.equal(widened.version?.status, 'pending_review');
    assert.equal(widened.action.description, 'now reads B');
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'approved', version: 1, digest: DIGEST_A, permissions: ['read_secret:A'] });
    assert.deepEqual(store.version(ORG, action.id, 1)?.permissions, ['read_secret:A'], 'version 1 is never rewritten');

    const same = await store.update(ORG, action.id, { permissions: ['read_secret:B', 'read_secret:A'] }, AT);
    assert.equal(same.version, null, 'the same set as the latest version writes no version');
    const renamed = await store.update(ORG, action.id, { name: 'renamed' }, AT);
    assert.equal(renamed.version, null);
    assert.equal(renamed.action.latest_version, 2);

    await store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin' }, AT);
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'approved', version: 2, digest: DIGEST_A, permissions: ['read_secret:A', 'read_secret:B'] });
  });

  it('rejecting a newer version leaves the approved one running', async () => {
    const action = await create();
    await store.review(ORG, action.id, { decision: 'approved', reason: null, reviewer: 'key_admin' }, AT);
    await store.addVersion(ORG, action.id, { module: { digest: DIGEST_B, size: 1, bytes: new Uint8Array(1) } }, AT);
    const rejected = await store.review(ORG, action.id, { decision: 'rejected', reason: 'no', reviewer: 'key_admin' }, AT);
    assert.equal(rejected.action.approved_version, 1);
    assert.deepEqual(store.resolveForRun(ORG, action.id), { kind: 'approved', version: 1, digest: DIGEST_A, permissions: [] });
  });

  it('lists an org (the API shows it newest first), never another org; refuses writes to unknown actions and past the version cap', async () => {
    const ids = ['act_00000000000000a1', 'act_00000000000000a2'] as CustomActionId[];
    const isolated = new CustomActionStore(opened.ledger, { newId: () => ids.shift() ?? assert.fail('no id left') });
    await isolated.create('acct-list', { name: 'one', description: 'd', module: { digest: DIGEST_A, size: 1, bytes: new Uint8Array(1) }, permissions: [] }, AT);
    await isolated.create('acct-list', { name: 'two', description: '', module: { digest: DIGEST_B, size: 2, bytes: new Uint8Array(2) }, permissions: [] }, AT + 1);
    assert.deepEqual(isolated.list('acct-list').sort(newestFirst).map((a) => a.name), ['two', 'one']);
    assert.deepEqual(isolated.list('acct-list-other'), []);
    await rejects(store.addVersion('acct-list-other', 'act_00000000000000a1', { module: { digest: DIGEST_A, size: 1, bytes: new Uint8Array(1) } }, AT), 404, 'not_found');
    await rejects(store.update(ORG, 'act_00000000000000a1', { name: 'x' }, AT), 404, 'not_found');

    const capped = await create();
    for (let n = 2; n <= MAX_VERSIONS_PER_ACTION; n++) await store.addVersion(ORG, capped.id, { module: { digest: DIGEST_B, size: 1, bytes: new Uint8Array(1) } }, AT);
    await rejects(store.addVersion(ORG, capped.id, { module: { digest: DIGEST_C, size: 1, bytes: new Uint8Array(1) } }, AT), 409, 'version_limit_reached');
    assert.equal(store.describe(ORG, capped.id)?.latest_version, MAX_VERSIONS_PER_ACTION);
  });

  it('keeps each upload\'s module bytes in the write that records the version, one copy per org and module, never in a view', async () => {
    const org = 'acct-bytes';
    const first = Buffer.from([0, 97, 115, 109, 1]);
    const second = Buffer.from([0, 97, 115, 109, 2]);
    const action = await store.create(org, { name: 'kept', description: '', module: { digest: DIGEST_A, size: first.length, bytes: first }, permissions: [] }, AT);
    assert.deepEqual(store.moduleBytes(org, DIGEST_A), first, 'readable once create resolves');
    await store.addVersion(org, action.id, { module: { digest: DIGEST_B, size: second.length, bytes: second } }, AT);
    assert.deepEqual(store.moduleBytes(org, DIGEST_B), second);
    // A permissions edit is a new version of the latest module: it shares the bytes kept.
    const edited = await store.update(org, action.id, { permissions: ['read_secret:A'] }, AT);
    assert.equal(edited.version?.digest, DIGEST_B);
    assert.deepEqual(store.moduleBytes(org, DIGEST_B), second);
    assert.equal(store.moduleBytes('acct-bytes-other', DIGEST_A), undefined, 'keys start with the org');
    assert.equal(store.moduleBytes(org, DIGEST_C), undefined);
    assert.equal(store.moduleBytes(org, 'not-a-digest'), undefined);
    const view = JSON.stringify(store.describe(org, action.id));
    assert.doesNotMatch(view, /bytes/, 'an answer carries digests and sizes only');
    assert.deepEqual(Object.keys(store.version(org, action.id, 1) ?? {}).sort(), ['created_at', 'digest', 'permissions', 'reason', 'reviewed_at', 'reviewer', 'size', 'status', 'version']);
  });

  it('an org holds at most maxModuleBytes of distinct modules: a module it holds already takes no room, another org has its own', async () => {
    const capped = new CustomActionStore(opened.ledger, { maxModuleBytes: 250 });
    const org = 'acct-module-cap';
    const module = (digest: string, size = 100) => ({ digest, size, bytes: new Uint8Array(size) });
    const action = await capped.create(org, { name: 'a', description: '', module: module(DIGEST_A), permissions: [] }, AT);
    await capped.addVersion(org, action.id, { module: module(DIGEST_B) }, AT);
    capped.assertRoom(org, module(DIGEST_A), action.id);
    await capped.addVersion(org, action.id, { module: module(DIGEST_A) }, AT);
    const full = await rejects(capped.addVersion(org, action.id, { module: module(DIGEST_C) }, AT), 409, 'module_storage_limit_reached');
    assert.match(full.message, /hold 200 bytes of modules; a new one of 100 bytes would pass the 250/);
    await rejects(capped.create(org, { name: 'b', description: '', module: module(DIGEST_C), permissions: [] }, AT), 409, 'module_storage_limit_reached');
    assert.throws(() => capped.assertRoom(org, module(DIGEST_C, 51)), (error: unknown) => error instanceof ConflictError && error.code === 'module_storage_limit_reached', 'refused before the upload is compiled');
    capped.assertRoom(org, module(DIGEST_C, 50));
    await capped.create('acct-module-cap-other', { name: 'c', description: '', module: module(DIGEST_C, 250), permissions: [] }, AT);
    // A version from before the runtime kept module bytes (its bytes removed here) holds none: a
    // store that reads the org's total afresh counts A only, and uploading B again (the repair) counts it.
    await opened.ledger.root.transaction(() => opened.ledger.openDatabase('custom-action-modules').remove([org, DIGEST_B]));
    const fresh = new CustomActionStore(opened.ledger, { maxModuleBytes: 250 });
    fresh.assertRoom(org, module(DIGEST_C, 150));
    await fresh.addVersion(org, action.id, { module: module(DIGEST_B) }, AT);
    assert.throws(() => fresh.assertRoom(org, module(DIGEST_C, 51)), (error: unknown) => error instanceof ConflictError && /hold 200 bytes/.test(error.message));
  });

  it('concurrent uploads of new modules are held to the cap together', async () => {
    const capped = new CustomActionStore(opened.ledger, { maxModuleBytes: 250 });
    const org = 'acct-module-cap-race';
    const action = await capped.create(org, { name: 'a', description: '', module: { digest: DIGEST_A, size: 100, bytes: new Uint8Array(100) }, permissions: [] }, AT);
    const uploads = ['1', '2', '3', '4'].map((d) => capped.addVersion(org, action.id, { module: { digest: d.repeat(64), size: 100, bytes: new Uint8Array(100) } }, AT));
    const settled = await Promise.allSettled(uploads);
    assert.deepEqual(settled.map((s) => s.status).sort(), ['fulfilled', 'rejected', 'rejected', 'rejected'], 'room for one more of 100 bytes');
  });

  it('concurrent new versions get distinct numbers', async () => {
    const action = await create();
    const results = await Promise.all([1, 2, 3, 4, 5].map(() => store.addVersion(ORG, action.id, { module: { digest: DIGEST_B, size: 1, bytes: new Uint8Array(1) } }, AT)));
    assert.deepEqual(results.map((r) => r.version?.version).sort(), [2, 3, 4, 5, 6]);
  });
});
