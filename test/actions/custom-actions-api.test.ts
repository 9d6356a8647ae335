// The custom actions API over real HTTP with a real hook-runner child (Wasmtime): upload and compile,
// review, versions, permission edits, secrets through the vault, simulate, roles and tenant isolation.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CustomActionStore, MAX_VERSIONS_PER_ACTION } from '../../runtime/actions/custom-action-store.ts';
import { SecretNames } from '../../runtime/actions/secret-names.ts';
import { KeyedSerial } from '../../runtime/keyed-serial.ts';
import { call } from '../helpers/http.ts';
import { createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { buildModules, keyWithRole, upload, type ActionModules } from './action-fixtures.ts';

const ORG = 'acct-actions';
const OTHER = 'acct-actions-other';
const base = `/organizations/${ORG}/custom-actions`;
const VERSION_KEYS = ['created_at', 'digest', 'permissions', 'reason', 'reviewed_at', 'reviewer', 'size', 'status', 'version'];
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

let rt: TestRuntime;
let store: CustomActionStore;
let modules: ActionModules;
let admin: { key: string; id: string };
let developer: string;
let viewer: string;
let otherKey: string;

before(async () => {
  rt = await startRuntime({ args: ['--runner', 'child'] });
  // A second handle on the runtime's own LMDB environment: exactly what the run engine would read.
  store = new CustomActionStore(rt.runtime.ledger);
  modules = await buildModules();
  const orgAdmin = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  admin = await keyWithRole(rt.url, ORG, orgAdmin, 'admin');
  developer = (await keyWithRole(rt.url, ORG, orgAdmin, 'developer')).key;
  viewer = (await keyWithRole(rt.url, ORG, orgAdmin, 'viewer')).key;
  otherKey = await createOrg(rt.url, ADMIN_TOKEN, OTHER);
});
after(async () => rt.close());

async function createAction(fields: Record<string, string | Uint8Array> = {}): Promise<{ id: string; body: any }> {
  const created = await upload(rt.url, base, developer, { name: 'order risk', file: modules.echo, ...fields });
  assert.equal(created.status, 201, created.text);
  return { id: created.body.custom_action.id as string, body: created.body };
}

const review = (id: string, json: unknown, token = admin.key) => call(rt.url, 'POST', `${base}/${id}/review`, { token, json });

/**
 * Resolves `joined` when a write of a secret of action `actionId` next takes its place in its
 * secret's line (KeyedSerial.run, under SecretWrites), from now until `restore`.
 */
function watchSecretLine(actionId: string): { joined: Promise<void>; restore: () => void } {
  const serial = KeyedSerial.prototype as unknown as { run: (key: string, ...rest: unknown[]) => Promise<unknown> };
  const { run } = serial;
  let join: () => void = () => undefined;
  const joined = new Promise<void>((resolve) => (join = resolve));
  serial.run = function (this: unknown, key: string, ...rest: unknown[]) {
    if (key.includes(actionId)) join();
    return run.call(this, key, ...rest);
  };
  return { joined, restore: () => void (serial.run = run) };
}

describe('upload', () => {
  it('compiles the module and stores version 1 pending review; list and get never return bytes', async () => {
    const { id, body } = await createAction({ description: 'scores orders', permissions: 'read_secret:API_KEY' });
    assert.match(id, /^act_[0-9a-f]{16}$/);
    const action = body.custom_action;
    assert.equal(action.name, 'order risk');
    assert.equal(action.description, 'scores orders');
    assert.equal(action.approved_version, null);
    assert.equal(action.latest_version, 1);
    assert.equal(action.versions.length, 1);
    const [version] = action.versions;
    assert.deepEqual(Object.keys(version).sort(), VERSION_KEYS);
    assert.equal(version.digest, sha256(modules.echo));
    assert.equal(version.size, modules.echo.byteLength);
    assert.equal(version.status, 'pending_review');
    assert.deepEqual(version.permissions, ['read_secret:API_KEY']);

    const got = await call(rt.url, 'GET', `${base}/${id}`, { token: viewer });
    assert.equal(got.status, 200);
    assert.deepEqual(got.body.custom_action, action);
    const listed = await call(rt.url, 'GET', base, { token: viewer });
    assert.equal(listed.status, 200);
    const entry = listed.body.custom_actions.find((candidate: { id: string }) => candidate.id === id);
    assert.deepEqual(entry, action);
    for (const answer of [got.text, listed.text]) {
      assert.doesNotMatch(answer, /"(module|bytes|wasm|file|data)"/);
      assert.ok(!answer.includes(Buffer.from(modules.echo).toString('base64')));
    }
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'not_approved', status: 'pending_review' });
  });

  it('accepts permissions as a JSON array, a comma list or a newline list, without duplicates', async () => {
    const expected = ['read_secret:API_KEY', 'read_secret:WEBHOOK_TOKEN'];
    for (const permissions of [
      JSON.stringify([...expected, 'read_secret:API_KEY']),
      'read_secret:API_KEY, read_secret:WEBHOOK_TOKEN,read_secret:API_KEY',
      'read_secret:API_KEY\nread_secret:WEBHOOK_TOKEN\n',
    ]) {
      const { body } = await createAction({ permissions });
      assert.deepEqual(body.custom_action.versions[0].permissions, expected, permissions);
    }
  });

  it('refuses bad permissions naming the entry, and a 26th permission', async () => {
    const bad = await upload(rt.url, base, developer, { name: 'x', file: modules.echo, permissions: 'read_secret:A,read_secret:B,read_secret:C,http:*' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_permission');
    assert.equal(bad.body.error.field, 'permissions[3]');
    const many = Array.from({ length: 26 }, (_, i) => `read_secret:K${i}`).join(',');
    const tooMany = await upload(rt.url, base, developer, { name: 'x', file: modules.echo, permissions: many });
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.body.error.code, 'too_many_permissions');
    assert.equal(tooMany.body.error.field, 'permissions');
  });

  it('refuses what the runner will not compile, with its reason; empty, missing and oversized modules', async () => {
    const withImport = await upload(rt.url, base, developer, { name: 'x', file: modules.withImport });
    assert.equal(withImport.status, 400);
    assert.equal(withImport.body.error.code, 'imports_not_allowed');
    assert.equal(withImport.body.error.field, 'file');
    assert.match(withImport.body.error.message, /wasi_snapshot_preview1\.fd_write/);
    const garbage = await upload(rt.url, base, developer, { name: 'x', file: new TextEncoder().encode('#!/bin/sh\necho not wasm\n') });
    assert.equal(garbage.status, 400, garbage.text);
    assert.equal(garbage.body.error.code, 'not_wasm');
    assert.equal(garbage.body.error.field, 'file');
    const noMemory = await upload(rt.url, base, developer, { name: 'x', file: new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]) });
    assert.equal(noMemory.status, 400, 'a valid but empty module breaks the ABI');
    assert.equal(noMemory.body.error.code, 'missing_export');
    assert.match(noMemory.body.error.message, /memory/);
    const empty = await upload(rt.url, base, developer, { name: 'x', file: new Uint8Array(0) });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error.field, 'file');
    const missing = await upload(rt.url, base, developer, { name: 'x' });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.code, 'module_required');
    const noName = await upload(rt.url, base, developer, { file: modules.echo });
    assert.equal(noName.status, 400);
    assert.equal(noName.body.error.field, 'name');

    const oversized = new Uint8Array(8 * 1024 * 1024 + 1);
    oversized.set(modules.echo);
    const tooLarge = await upload(rt.url, base, developer, { name: 'x', file: oversized });
    assert.equal(tooLarge.status, 413);
    assert.equal(tooLarge.body.error.code, 'module_too_large');
    const overCap = await upload(rt.url, base, developer, { name: 'x', file: new Uint8Array(8 * 1024 * 1024 + 64 * 1024) });
    assert.equal(overCap.status, 413);
    assert.equal(overCap.body.error.code, 'payload_too_large');

    const asJson = await call(rt.url, 'POST', base, { token: developer, json: { name: 'x' } });
    assert.equal(asJson.status, 415);
    assert.deepEqual(store.resolveForRun(ORG, 'act_0000000000000000'), { kind: 'missing' });
  });

  it('an upload past the version cap is refused before it is compiled (the runner keeps every module it compiles)', async () => {
    const { id } = await createAction();
    const digest = createHash('sha256').update('filler').digest('hex');
    for (let n = 2; n <= MAX_VERSIONS_PER_ACTION; n++) await store.addVersion(ORG, id, { module: { digest, size: 1, bytes: new Uint8Array(1) } }, Date.now());
    // Garbage would be a 400 not_wasm from the compiler: the 409 shows the cap was checked first.
    const refused = await upload(rt.url, `${base}/${id}/versions`, developer, { file: new TextEncoder().encode('not wasm') });
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.error.code, 'version_limit_reached');
  });

  it('needs a developer key to upload', async () => {
    const denied = await upload(rt.url, base, viewer, { name: 'x', file: modules.echo });
    assert.equal(denied.status, 403);
  });
});

describe('review and versions', () => {
  it('only an admin reviews; approve, then a second review of that version is 409', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    const byDeveloper = await review(id, { status: 'approved', version: 1 }, developer);
    assert.equal(byDeveloper.status, 403);
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'not_approved', status: 'pending_review' });

    // A version past what a JSON number holds exactly is refused by name, not looked up rounded.
    const huge = await call(rt.url, 'POST', `${base}/${id}/review`, { token: admin.key, body: '{"status":"approved","version":99999999999999999999}', headers: { 'content-type': 'application/json' } });
    assert.deepEqual([huge.status, huge.body.error?.field], [400, 'version'], huge.text);
    const unnamed = await review(id, { status: 'approved' });
    assert.deepEqual([unnamed.status, unnamed.body.error.code, unnamed.body.error.field], [400, 'version_required', 'version'], 'an approval names the version reviewed');
    const approved = await review(id, { status: 'approved', version: 1, reason: 'reads one key, looks fine' });
    assert.equal(approved.status, 200, approved.text);
    assert.equal(approved.body.custom_action.approved_version, 1);
    assert.equal(approved.body.reviewed_version.status, 'approved');
    assert.equal(approved.body.reviewed_version.reviewer, admin.id);
    assert.equal(approved.body.reviewed_version.reason, 'reads one key, looks fine');
    assert.equal(typeof approved.body.reviewed_version.reviewed_at, 'string');
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'approved', version: 1, digest: sha256(modules.echo), permissions: ['read_secret:API_KEY'] });

    const again = await review(id, { status: 'rejected', version: 1 });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'version_not_pending');
    assert.equal(again.body.error.status, 'approved');
    const nothingPending = await review(id, { status: 'rejected' });
    assert.equal(nothingPending.status, 409);
    assert.equal(nothingPending.body.error.code, 'no_pending_version');
    assert.equal((await review(id, { status: 'maybe' })).body.error.field, 'status');
    assert.equal((await review(id, { status: 'approved', version: 7 })).status, 404);
  });

  it('a rejected action never resolves for a run', async () => {
    const { id } = await createAction();
    const rejected = await review(id, { status: 'rejected', reason: 'too broad' });
    assert.equal(rejected.status, 200);
    assert.equal(rejected.body.custom_action.approved_version, null);
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'not_approved', status: 'rejected' });
  });

  it('a new module version waits for review while the approved one keeps running', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    await review(id, { status: 'approved', version: 1 });
    const v2 = await upload(rt.url, `${base}/${id}/versions`, developer, { file: modules.projection, description: 'now writes a projection' });
    assert.equal(v2.status, 201, v2.text);
    assert.equal(v2.body.new_version.version, 2);
    assert.equal(v2.body.new_version.status, 'pending_review');
    assert.equal(v2.body.new_version.digest, sha256(modules.projection));
    assert.deepEqual(v2.body.new_version.permissions, ['read_secret:API_KEY'], 'permissions carry over when the form has none');
    assert.equal(v2.body.custom_action.description, 'now writes a projection');
    assert.equal(v2.body.custom_action.name, 'order risk');
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'approved', version: 1, digest: sha256(modules.echo), permissions: ['read_secret:API_KEY'] });

    const approved = await review(id, { status: 'approved', version: 2 });
    assert.equal(approved.body.reviewed_version.version, 2);
    assert.deepEqual(approved.body.custom_action.versions.map((v: { status: string }) => v.status), ['superseded', 'approved']);
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'approved', version: 2, digest: sha256(modules.projection), permissions: ['read_secret:API_KEY'] });
  });

  it('a PATCH of permissions is a new pending version of the same module and never widens the approved one', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    await review(id, { status: 'approved', version: 1 });
    const widened = await call(rt.url, 'PATCH', `${base}/${id}`, {
      token: developer,
      json: { name: 'order risk v2', permissions: ['read_secret:API_KEY', 'read_secret:ADMIN_PASSWORD'] },
    });
    assert.equal(widened.status, 200, widened.text);
    assert.equal(widened.body.custom_action.name, 'order risk v2');
    assert.equal(widened.body.new_version.version, 2);
    assert.equal(widened.body.new_version.status, 'pending_review');
    assert.equal(widened.body.new_version.digest, sha256(modules.echo));
    assert.deepEqual(widened.body.custom_action.versions[0].permissions, ['read_secret:API_KEY']);
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'approved', version: 1, digest: sha256(modules.echo), permissions: ['read_secret:API_KEY'] });

    const renamed = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { description: 'no new version' } });
    assert.equal(renamed.body.new_version, null);
    // Caps count characters: 120 emoji are a 120-character name, as 120 letters are.
    const emoji = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { name: '🚀'.repeat(120), description: '🚀'.repeat(2000) } });
    assert.equal(emoji.status, 200, emoji.text);
    const tooLong = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { name: '🚀'.repeat(121) } });
    assert.deepEqual([tooLong.status, tooLong.body.error.field], [400, 'name']);
    assert.equal((await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { name: 'order risk v2' } })).status, 200);
    const bad = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { permissions: ['read_secret:OK', 'exec'] } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.field, 'permissions[1]');
    assert.equal((await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { colour: 'red' } })).body.error.code, 'unknown_field');
    assert.equal((await call(rt.url, 'PATCH', `${base}/${id}`, { token: viewer, json: { name: 'v' } })).status, 403);

    await review(id, { status: 'approved', version: 2 });
    assert.deepEqual(store.resolveForRun(ORG, id), {
      kind: 'approved', version: 2, digest: sha256(modules.echo), permissions: ['read_secret:API_KEY', 'read_secret:ADMIN_PASSWORD'],
    });
  });

  it('a PATCH of permissions never puts a rejected module up for review again', async () => {
    const { id } = await createAction();
    await review(id, { status: 'approved', version: 1 });
    const v2 = await upload(rt.url, `${base}/${id}/versions`, developer, { file: modules.projection });
    assert.equal(v2.status, 201, v2.text);
    assert.equal((await review(id, { status: 'rejected', reason: 'writes where it should not' })).status, 200);
    const refused = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { permissions: ['read_secret:API_KEY'] } });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'module_rejected');
    assert.equal(refused.body.error.version, 2);

    // The module becomes the latest again through a version that is still pending; rejecting that
    // earlier version by number must not let a later permissions edit carry the module on.
    const { id: other } = await createAction();
    await review(other, { status: 'approved', version: 1 });
    assert.equal((await upload(rt.url, `${base}/${other}/versions`, developer, { file: modules.projection })).status, 201);
    const v3 = await call(rt.url, 'PATCH', `${base}/${other}`, { token: developer, json: { permissions: ['read_secret:API_KEY'] } });
    assert.equal(v3.body.new_version.version, 3);
    assert.equal((await review(other, { status: 'rejected', version: 2, reason: 'no' })).status, 200);
    const v4 = await call(rt.url, 'PATCH', `${base}/${other}`, { token: developer, json: { permissions: ['read_secret:OTHER'] } });
    assert.equal(v4.status, 409);
    assert.equal(v4.body.error.code, 'module_rejected');
    // The permission edit made before the rejection (v3, the same code) is rejected with it: approving
    // it would have run the rejected code under a new secret permission.
    const v3After = store.versions(ORG, other).find((version) => version.version === 3)!;
    assert.deepEqual([v3After.status, v3After.reason], ['rejected', 'its module was rejected in version 2']);
    const approveV3 = await review(other, { status: 'approved', version: 3 });
    assert.deepEqual([approveV3.status, approveV3.body.error.code], [409, 'version_not_pending']);
  });

  it('a rejected permissions change of an approved module leaves the module editable: the verdict was on the permissions', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    await review(id, { status: 'approved', version: 1 });
    const wider = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { permissions: ['read_secret:API_KEY', 'read_secret:ADMIN_PASSWORD'] } });
    assert.equal(wider.body.new_version.version, 2);
    assert.equal((await review(id, { status: 'rejected', version: 2, reason: 'too wide' })).status, 200);
    const narrower = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { permissions: [] } });
    assert.equal(narrower.status, 200, narrower.text);
    assert.deepEqual([narrower.body.new_version.version, narrower.body.new_version.status], [3, 'pending_review']);
  });

  it('a module superseded while pending was never approved: its later rejection still stands against permission edits', async () => {
    const { id } = await createAction();
    assert.equal((await upload(rt.url, `${base}/${id}/versions`, developer, { file: modules.projection })).status, 201);
    await review(id, { status: 'approved', version: 2 });
    assert.equal((await upload(rt.url, `${base}/${id}/versions`, developer, { file: modules.echo })).status, 201);
    assert.equal((await review(id, { status: 'rejected', version: 3, reason: 'this code is not acceptable' })).status, 200);
    const edit = await call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json: { permissions: ['read_secret:API_KEY'] } });
    assert.deepEqual([edit.status, edit.body.error?.code, edit.body.error?.version], [409, 'module_rejected', 3], edit.text);
  });

  it('a PATCH with If-Match is refused (412, nothing written) once a review, an upload or another PATCH changed the action', async () => {
    const { id } = await createAction();
    const tagOf = (answer: { headers: Headers }): string => answer.headers.get('etag') ?? assert.fail('an ETag');
    const guarded = (json: unknown, tag: string) => call(rt.url, 'PATCH', `${base}/${id}`, { token: developer, json, headers: { 'if-match': tag } });
    const read = async () => call(rt.url, 'GET', `${base}/${id}`, { token: viewer });
    const made = tagOf(await read());
    const approved = await review(id, { status: 'approved', version: 1 });
    assert.notEqual(tagOf(approved), made, 'a review moves the tag');
    const stale = await guarded({ name: 'renamed from a stale read' }, made);
    assert.deepEqual([stale.status, stale.body.error.code, stale.body.error.current_etag], [412, 'etag_mismatch', tagOf(approved)], stale.text);
    assert.equal((await read()).body.custom_action.name, 'order risk');

    const renamed = await guarded({ name: 'renamed' }, tagOf(approved));
    assert.equal(renamed.status, 200, renamed.text);
    const uploaded = await upload(rt.url, `${base}/${id}/versions`, developer, { file: modules.projection });
    assert.equal(uploaded.status, 201, uploaded.text);
    assert.notEqual(tagOf(uploaded), tagOf(renamed), 'an upload moves the tag');
    assert.equal((await guarded({ permissions: ['read_secret:API_KEY'] }, tagOf(renamed))).status, 412);
    assert.equal((await read()).body.custom_action.latest_version, 2, 'the refused permission change made no version');

    // Two editors of the same read: one new version, one refusal.
    const both = await Promise.all([guarded({ permissions: ['read_secret:A'] }, tagOf(uploaded)), guarded({ permissions: ['read_secret:B'] }, tagOf(uploaded))]);
    assert.deepEqual(both.map((answer) => answer.status).sort(), [200, 412], both.map((answer) => answer.text).join('\n'));
    const now = await read();
    assert.equal(now.body.custom_action.latest_version, 3);
    assert.equal(tagOf(now), tagOf(both.find((answer) => answer.status === 200)!));
  });
});

describe('secrets', () => {
  it('sets, lists names only, deletes; a value never appears in any answer', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    const secrets = `${base}/${id}/secrets`;
    const value = `s3cr3t-${Math.random().toString(36).slice(2)}-value`;
    const put = await call(rt.url, 'POST', secrets, { token: developer, json: { key: 'API_KEY', value } });
    assert.equal(put.status, 204, put.text);
    assert.equal(put.text, '');
    assert.equal((await call(rt.url, 'POST', secrets, { token: developer, json: { key: 'OTHER', value: 'x' } })).status, 204);
    const listed = await call(rt.url, 'GET', secrets, { token: developer });
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body, { keys: ['API_KEY', 'OTHER'] });

    const answers = [put, listed, await call(rt.url, 'GET', `${base}/${id}`, { token: developer }), await call(rt.url, 'GET', base, { token: developer })];
    const simulated = await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: { payload: { order: 1 } } });
    assert.equal(simulated.status, 200);
    for (const answer of [...answers, simulated]) assert.ok(!answer.text.includes(value), 'the value never comes back');

    assert.equal((await call(rt.url, 'DELETE', `${secrets}/OTHER`, { token: developer })).status, 204);
    assert.deepEqual((await call(rt.url, 'GET', secrets, { token: developer })).body, { keys: ['API_KEY'] });
    const gone = await call(rt.url, 'DELETE', `${secrets}/OTHER`, { token: developer });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.field, 'key');
    // A name no secret could have names none held: 404 too, not a 400 about its spelling.
    for (const never of ['lowercase', '__proto__', 'X'.repeat(300)]) {
      const none = await call(rt.url, 'DELETE', `${secrets}/${never}`, { token: developer });
      assert.deepEqual([none.status, none.body.error.code, none.body.error.field], [404, 'not_found', 'key'], never.slice(0, 20));
    }
  });

  it('a delete whose secret the runner no longer holds (an earlier attempt of the call took it, its answer lost) is 204 while Sluice still named it', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    const secrets = `${base}/${id}/secrets`;
    assert.equal((await call(rt.url, 'POST', secrets, { token: developer, json: { key: 'API_KEY', value: 'v' } })).status, 204);
    // What a first attempt whose answer was lost did: the runner deleted it; the client's retry finds nothing.
    assert.equal(await rt.runtime.runner.client!.deleteSecret({ orgId: ORG, actionId: id, key: 'API_KEY' }), true);
    assert.equal((await call(rt.url, 'DELETE', `${secrets}/API_KEY`, { token: developer })).status, 204);
    assert.deepEqual((await call(rt.url, 'GET', secrets, { token: developer })).body, { keys: [] });
    assert.equal((await call(rt.url, 'DELETE', `${secrets}/API_KEY`, { token: developer })).status, 404, 'named by neither side now');
  });

  it('a PUT and a DELETE of one secret at once go one after the other: Sluice names it exactly when the runner holds it', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    const secrets = `${base}/${id}/secrets`;
    const client = rt.runtime.runner.client!;
    const putSecret = client.putSecret.bind(client);
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let stored: () => void = () => undefined;
    const runnerHasIt = new Promise<void>((resolve) => (stored = resolve));
    // The runner stores it, and its answer is slow to come back: the DELETE arrives in between.
    client.putSecret = async (request) => {
      const answer = await putSecret(request);
      stored();
      await held;
      return answer;
    };
    let line: ReturnType<typeof watchSecretLine> | undefined;
    try {
      const put = call(rt.url, 'POST', secrets, { token: developer, json: { key: 'API_KEY', value: 'value-1234' } });
      await runnerHasIt;
      // Watched from here: the PUT joined the line before this, only the DELETE can join it now.
      line = watchSecretLine(id);
      const deleted = call(rt.url, 'DELETE', `${secrets}/API_KEY`, { token: developer });
      // The PUT's answer is let through once the DELETE has taken its place in the secret's line
      // (then it runs after the PUT's write whenever that settles), or has been answered (without
      // the line it went first: the names then disagree below).
      await Promise.race([line.joined, deleted]);
      release();
      assert.equal((await put).status, 204);
      assert.equal((await deleted).status, 204);
    } finally {
      release();
      client.putSecret = putSecret;
      line?.restore();
    }
    const runnerKeys = (await call(rt.url, 'GET', secrets, { token: developer })).body.keys;
    const named = new SecretNames(rt.runtime.ledger).of(ORG, id);
    assert.deepEqual({ runnerKeys, named }, { runnerKeys: [], named: [] }, 'the DELETE came second, on both sides');
  });

  it('validates key and value without echoing the value; needs developer; needs the action', async () => {
    const { id } = await createAction();
    const secrets = `${base}/${id}/secrets`;
    const badKey = await call(rt.url, 'POST', secrets, { token: developer, json: { key: 'api-key', value: 'v' } });
    assert.equal(badKey.status, 400);
    assert.equal(badKey.body.error.field, 'key');
    const big = 'x'.repeat(64 * 1024 + 1);
    const tooLarge = await call(rt.url, 'POST', secrets, { token: developer, json: { key: 'BIG', value: big } });
    assert.equal(tooLarge.status, 400);
    assert.equal(tooLarge.body.error.code, 'secret_too_large');
    assert.ok(!tooLarge.text.includes('xxxxxxxx'));
    assert.equal((await call(rt.url, 'POST', secrets, { token: developer, json: { key: 'MAX', value: 'y'.repeat(64 * 1024) } })).status, 204);
    assert.equal((await call(rt.url, 'DELETE', `${secrets}/bad-key`, { token: developer })).status, 404, 'a name no secret could have: none held');
    assert.equal((await call(rt.url, 'GET', secrets, { token: viewer })).status, 403);
    assert.equal((await call(rt.url, 'POST', secrets, { token: viewer, json: { key: 'A', value: 'v' } })).status, 403);
    const unknown = await call(rt.url, 'POST', `${base}/act_0000000000000000/secrets`, { token: developer, json: { key: 'A', value: 'v' } });
    assert.equal(unknown.status, 404);
  });
});

describe('simulate', () => {
  it('runs the latest version unapproved, with no secrets even when a permission covers one', async () => {
    const { id } = await createAction({ permissions: 'read_secret:API_KEY' });
    assert.equal((await call(rt.url, 'POST', `${base}/${id}/secrets`, { token: developer, json: { key: 'API_KEY', value: 'never-in-simulate' } })).status, 204);
    const simulated = await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: { payload: { order_id: 'ord_9', amount: 4200 } } });
    assert.equal(simulated.status, 200, simulated.text);
    assert.equal(simulated.body.outcome, 'output');
    assert.equal(simulated.body.version, 1);
    assert.deepEqual(simulated.body.output.payload, { order_id: 'ord_9', amount: 4200 });
    assert.deepEqual(simulated.body.output.secrets, {});
    assert.deepEqual(simulated.body.output.permissions, ['read_secret:API_KEY']);
    assert.deepEqual(simulated.body.output.action, { id, digest: sha256(modules.echo) });
    assert.deepEqual(simulated.body.contract, { ok: true });
    assert.ok(simulated.body.fuel_used > 0);
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'not_approved', status: 'pending_review' }, 'simulating approves nothing');
    assert.equal((await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: viewer, json: { payload: 1 } })).status, 403);
    assert.equal((await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: {} })).body.error.field, 'payload');
  });

  it('hands the payload to the guest as sent and answers with its output as written: long integers stay exact', async () => {
    const { id } = await createAction({});
    const response = await fetch(`${rt.url}${base}/${id}/simulate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${developer}`, 'content-type': 'application/json' },
      body: '{"payload":{"order_id":820982911946154508,"huge":1e400}}',
    });
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.match(text, /"order_id":820982911946154508/, text);
    assert.match(text, /"huge":1e400/, text);
  });

  it('checks the output contract: a valid projection is ok, a bad entity_type names the field', async () => {
    const { id } = await createAction({ file: modules.projection });
    const good = await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: { payload: null } });
    assert.equal(good.body.outcome, 'output');
    assert.equal(good.body.output.score, 7);
    assert.deepEqual(good.body.contract, { ok: true });

    const v2 = await upload(rt.url, `${base}/${id}/versions`, developer, { file: modules.badProjection });
    assert.equal(v2.status, 201);
    const bad = await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: { payload: null } });
    assert.equal(bad.body.version, 2);
    assert.equal(bad.body.outcome, 'output');
    assert.equal(bad.body.contract.ok, false);
    assert.equal(bad.body.contract.field, 'projection.entity_type');
    assert.match(bad.body.contract.message, /entity_type/);
    const first = await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: { payload: null, version: 1 } });
    assert.equal(first.body.version, 1);
    assert.deepEqual(first.body.contract, { ok: true });
    assert.equal((await call(rt.url, 'POST', `${base}/${id}/simulate`, { token: developer, json: { payload: null, version: 3 } })).status, 404);
  });

  it('reports a rejection and a trap', async () => {
    const rejecting = await createAction({ file: modules.reject });
    const rejected = await call(rt.url, 'POST', `${base}/${rejecting.id}/simulate`, { token: developer, json: { payload: {} } });
    assert.equal(rejected.body.outcome, 'rejected');
    assert.equal(rejected.body.output, null);
    assert.equal(rejected.body.contract.ok, false);
    const trapping = await createAction({ file: modules.trap });
    const trapped = await call(rt.url, 'POST', `${base}/${trapping.id}/simulate`, { token: developer, json: { payload: {} } });
    assert.equal(trapped.body.outcome, 'trap');
    assert.equal(trapped.body.trap.kind, 'unreachable');
    assert.equal(trapped.body.output, null);
  });
});

describe('tenancy', () => {
  it('another org gets 404 for every custom action path, and sees none in its own list', async () => {
    const { id } = await createAction();
    const paths: [string, string, unknown?][] = [
      ['GET', `${base}/${id}`],
      ['GET', base],
      ['PATCH', `${base}/${id}`, { name: 'mine' }],
      ['POST', `${base}/${id}/review`, { status: 'approved', version: 1 }],
      ['POST', `${base}/${id}/simulate`, { payload: 1 }],
      ['GET', `${base}/${id}/secrets`],
      ['POST', `${base}/${id}/secrets`, { key: 'A', value: 'v' }],
      ['DELETE', `${base}/${id}/secrets/A`],
    ];
    for (const [method, path, json] of paths) {
      const answer = await call(rt.url, method, path, { token: otherKey, ...(json === undefined ? {} : { json }) });
      assert.equal(answer.status, 404, `${method} ${path}`);
    }
    const theirs = `/organizations/${OTHER}/custom-actions`;
    assert.equal((await call(rt.url, 'GET', `${theirs}/${id}`, { token: otherKey })).status, 404);
    assert.equal((await call(rt.url, 'POST', `${theirs}/${id}/review`, { token: otherKey, json: { status: 'approved', version: 1 } })).status, 404);
    assert.equal((await call(rt.url, 'POST', `${theirs}/${id}/simulate`, { token: otherKey, json: { payload: 1 } })).status, 404);
    assert.deepEqual((await call(rt.url, 'GET', theirs, { token: otherKey })).body, { custom_actions: [], next_cursor: null });
    assert.deepEqual(store.resolveForRun(OTHER, id), { kind: 'missing' });
    assert.deepEqual(store.resolveForRun(ORG, id), { kind: 'not_approved', status: 'pending_review' }, 'nothing of org B touched it');
  });
});
