// Workflows over a real runtime: the REST API (CRUD, toggle, versions, rotation, validation,
// roles, viewer redaction, tenancy, the sandbox plan rule). The store itself: test/workflows/workflow-store.test.ts.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { WorkflowStore } from '../../runtime/workflows/workflow-store.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const T0 = Date.UTC(2026, 10, 30);
const SECRET_FORMAT = /^whsec_[A-Za-z0-9+/]{43}=$/;
const hook = (url = 'https://example.com/hook') => ({ type: 'webhook', url });
const ids = (versions: readonly { workflow_id: string }[]): string[] => versions.map((v) => v.workflow_id).sort();

describe('workflows REST API', () => {
  const clock = new ManualClock(T0);
  let rt: TestRuntime;
  let store: WorkflowStore;
  let key: string;
  let viewer: string;
  let otherKey: string;
  const base = '/organizations/acct-wf/workflows';
  before(async () => {
    rt = await startRuntime({ clock });
    store = rt.runtime.workflows;
    key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-wf');
    otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-other');
    viewer = (await call(rt.url, 'POST', '/organizations/acct-wf/api-keys', { token: key, json: { role: 'viewer' } })).body.key;
  });
  after(async () => rt.close());

  const api = (method: string, path: string, json?: unknown, token = key) =>
    call(rt.url, method, `${base}${path}`, { token, ...(json === undefined ? {} : { json }) });
  const create = async (body: Record<string, unknown> = {}) => {
    const answer = await api('POST', '', { name: 'Notify', trigger_event: 'payment.succeeded', steps: [hook()], ...body });
    assert.equal(answer.status, 201, answer.text);
    return answer.body as { workflow: { id: string; version: number } & Record<string, unknown>; signing_secret: string };
  };

  test('create, get, list, update, toggle, delete; the signing secret is shown only once', async () => {
    const created = await create({ steps: [{ id: 'ship', ...hook() }, { type: 'delay', duration_ms: 1000 }] });
    const id = created.workflow.id;
    assert.match(created.signing_secret, SECRET_FORMAT);
    assert.equal(created.workflow.version, 1);
    assert.equal(created.workflow.status, 'enabled');
    assert.equal(created.workflow.environment, 'production');
    const secretBody = created.signing_secret.slice('whsec_'.length);

    const got = await api('GET', `/${id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body.workflow, created.workflow);
    const listed = await api('GET', '');
    assert.ok(listed.body.workflows.some((w: { id: string }) => w.id === id));
    assert.deepEqual((await api('GET', '?environment=sandbox')).body.workflows, []);

    clock.advance(1000);
    const put = await api('PUT', `/${id}`, { name: 'Notify v2', trigger_event: 'payment.succeeded', steps: [{ id: 'ship', ...hook('https://b.example/') }] });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.workflow.version, 2);
    assert.equal(put.body.workflow.steps[0].id, 'ship');
    const patched = await api('PATCH', `/${id}`, { name: 'Renamed' });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.workflow.version, 3);
    assert.equal(patched.body.workflow.name, 'Renamed');
    assert.deepEqual(patched.body.workflow.steps, put.body.workflow.steps, 'PATCH without steps keeps steps and ids');

    const off = await api('POST', `/${id}/toggle`, { action: 'disable' });
    assert.equal(off.status, 200);
    assert.equal(off.body.workflow.status, 'disabled');
    assert.equal(off.body.workflow.version, 4);
    assert.deepEqual(ids(store.matching('acct-wf', 'production', 'payment.succeeded')).includes(id), false);
    const on = await api('POST', `/${id}/toggle`, { action: 'enable' });
    assert.equal(on.body.workflow.status, 'enabled');
    assert.ok(ids(store.matching('acct-wf', 'production', 'payment.succeeded')).includes(id));
    const badToggle = await api('POST', `/${id}/toggle`, { action: 'pause' });
    assert.equal(badToggle.status, 400);
    assert.equal(badToggle.body.error.field, 'action');

    for (const answer of [got, listed, put, patched, off, on, await api('GET', `/${id}/versions`)]) {
      assert.ok(!answer.text.includes(secretBody), 'no answer but create holds the secret');
    }

    assert.equal((await api('DELETE', `/${id}`)).status, 204);
    assert.equal((await api('GET', `/${id}`)).status, 404);
    assert.equal((await api('DELETE', `/${id}`)).status, 404);
    assert.ok(!ids(store.matching('acct-wf', 'production', 'payment.succeeded')).includes(id));
    assert.equal(store.version('acct-wf', id, 5)?.definition.status, 'enabled', 'pinned versions survive the delete');
    const pinned = await api('GET', `/${id}/versions/5`);
    assert.equal(pinned.status, 200, 'a deleted workflow\'s versions stay readable for the runs pinned to them');
    assert.equal(pinned.body.version.definition.status, 'enabled');
    assert.equal((await api('GET', `/${id}/versions`)).body.versions.length, 5);
    assert.equal((await api('GET', `/${id}/versions/5?environment=sandbox`)).status, 404, 'in its own environment only');
  });

  test('the list comes in pages, newest created first, with a cursor that visits each workflow once', async () => {
    const own = 'acct-wf-pages';
    const ownKey = await createOrg(rt.url, ADMIN_TOKEN, own);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      const created = await call(rt.url, 'POST', `/organizations/${own}/workflows`, { token: ownKey, json: { name: `w${i}`, trigger_event: 'page.x', steps: [hook()] } });
      ids.push(created.body.workflow.id);
    }
    const seen: string[][] = [];
    let cursor: string | null = null;
    do {
      const page = await call(rt.url, 'GET', `/organizations/${own}/workflows?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`, { token: ownKey });
      assert.equal(page.status, 200, page.text);
      seen.push(page.body.workflows.map((w: { id: string }) => w.id));
      cursor = page.body.next_cursor;
    } while (cursor !== null && seen.length < 10);
    assert.deepEqual(seen, [[ids[4], ids[3]], [ids[2], ids[1]], [ids[0]]]);
    const bad = await call(rt.url, 'GET', `/organizations/${own}/workflows?cursor=nonsense`, { token: ownKey });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_cursor');
  });

  test('versions are immutable: version 1 keeps its old steps after an update', async () => {
    const { workflow } = await create({ steps: [{ id: 'one', ...hook('https://old.example/') }] });
    clock.advance(1000);
    const put = await api('PUT', `/${workflow.id}`, { steps: [{ id: 'one', ...hook('https://new.example/') }, { type: 'delay', duration: 'PT1M' }] });
    assert.equal(put.body.workflow.version, 2);
    const v1 = await api('GET', `/${workflow.id}/versions/1`);
    assert.equal(v1.status, 200);
    assert.equal(v1.body.version.version, 1);
    assert.deepEqual(v1.body.version.definition.steps.map((s: { url?: string }) => s.url), ['https://old.example/']);
    const v2 = await api('GET', `/${workflow.id}/versions/2`);
    assert.equal(v2.body.version.definition.steps.length, 2);
    assert.equal(v2.body.version.definition.steps[0].id, 'one');
    const list = await api('GET', `/${workflow.id}/versions`);
    assert.deepEqual(list.body.versions.map((v: { version: number }) => v.version), [2, 1]);
    assert.equal(list.body.next_cursor, null);
    const page = await api('GET', `/${workflow.id}/versions?limit=1`);
    assert.deepEqual(page.body.versions.map((v: { version: number }) => v.version), [2]);
    const rest = await api('GET', `/${workflow.id}/versions?limit=1&cursor=${page.body.next_cursor}`);
    assert.deepEqual(rest.body.versions.map((v: { version: number }) => v.version), [1]);
    for (const missing of ['3', '0', '-1', 'abc', '1.5']) {
      assert.equal((await api('GET', `/${workflow.id}/versions/${missing}`)).status, 404, missing);
    }
    // The name echoed is cut to 20 characters, never inside a surrogate pair (a lone half is JSON strict parsers refuse).
    const cut = await api('GET', `/${workflow.id}/versions/${encodeURIComponent(`${'x'.repeat(19)}😀`)}`);
    assert.equal(cut.body.error.message.startsWith(`Version ${'x'.repeat(19)} of this workflow`), true, cut.body.error.message);
    assert.equal((await api('GET', `/${workflow.id}/versions?cursor=zz`)).body.error.field, 'cursor');
    // A cursor goes on only with its own workflow's versions: another's page is a 400, not its versions.
    const { workflow: other } = await create({ steps: [{ id: 'one', ...hook('https://other.example/') }] });
    await api('PUT', `/${other.id}`, { steps: [{ id: 'one', ...hook('https://other2.example/') }] });
    const elsewhere = await api('GET', `/${other.id}/versions?limit=1&cursor=${page.body.next_cursor}`);
    assert.deepEqual([elsewhere.status, elsewhere.body.error?.code], [400, 'invalid_cursor']);
  });

  test('a page of versions ends once its answer passes 16 MiB, with a cursor to the rest', async () => {
    // 50 steps of 20 headers of 1,000 characters: about 1 MB a version, as the limits allow.
    const headers = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`x-h${i}`, 'v'.repeat(1000)]));
    const { workflow } = await create({ steps: Array.from({ length: 50 }, (_, i) => ({ id: `s${i}`, ...hook(), headers })) });
    for (let i = 2; i <= 20; i++) assert.equal((await api('PATCH', `/${workflow.id}`, { name: `v${i}` })).status, 200);
    const seen: number[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const page = await api('GET', `/${workflow.id}/versions?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`);
      assert.equal(page.status, 200, page.text.slice(0, 300));
      const versions = page.body.versions as Array<{ version: number }>;
      seen.push(...versions.map((v) => v.version));
      sizes.push(versions.length);
      cursor = page.body.next_cursor;
    } while (cursor !== null && sizes.length < 10);
    assert.deepEqual(seen, Array.from({ length: 20 }, (_, i) => 20 - i), 'every version once, newest first');
    assert.ok(sizes[0]! >= 15 && sizes[0]! < 20, `the first page is cut short by bytes, after 16 MiB: ${sizes.join(', ')}`);
  });

  test('a webhook URL is at most 2,048 characters as stored, once percent-encoded', async () => {
    const path = '中'.repeat(300);
    const refused = await api('POST', '', { name: 'n', trigger_event: 'a.b', steps: [hook(`https://example.com/${path}`)] });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.body.error.field, 'steps[0].url');
    assert.match(refused.body.error.message, /2,?048 characters/);
    assert.equal((await api('POST', '', { name: 'n', trigger_event: 'a.b', steps: [hook(`https://example.com/${'中'.repeat(200)}`)] })).status, 201, '1,820 once encoded');
  });

  test('concurrent partial updates both land: neither PATCH loses the other\'s change', async () => {
    const { workflow } = await create();
    const answers = await Promise.all([
      api('PATCH', `/${workflow.id}`, { name: 'Renamed concurrently' }),
      api('PATCH', `/${workflow.id}`, { channel: 'orders' }),
      api('PATCH', `/${workflow.id}`, { trigger_event: 'payment.refunded' }),
    ]);
    assert.deepEqual(answers.map((a) => a.status), [200, 200, 200], answers.map((a) => a.text).join('\n'));
    const final = (await api('GET', `/${workflow.id}`)).body.workflow;
    assert.equal(final.version, 4);
    assert.equal(final.name, 'Renamed concurrently');
    assert.equal(final.channel, 'orders');
    assert.equal(final.trigger_event, 'payment.refunded');
    assert.deepEqual(ids(store.matching('acct-wf', 'production', 'payment.refunded')), [workflow.id]);
  });

  test('many concurrent updates and toggles of one workflow all land, each a version of its own, none refused as a conflict', async () => {
    const { workflow } = await create();
    const answers = await Promise.all([
      ...Array.from({ length: 40 }, (_, i) => api('PATCH', `/${workflow.id}`, { name: `Name ${i}` })),
      ...Array.from({ length: 10 }, (_, i) => api('POST', `/${workflow.id}/toggle`, { action: i % 2 === 0 ? 'disable' : 'enable' })),
    ]);
    assert.deepEqual(answers.filter((a) => a.status !== 200).map((a) => a.text), []);
    const final = (await api('GET', `/${workflow.id}`)).body.workflow;
    const versions = (await api('GET', `/${workflow.id}/versions?limit=500`)).body.versions as Array<{ version: number }>;
    assert.deepEqual(versions.map((v) => v.version).sort((a, b) => a - b), Array.from({ length: final.version }, (_, i) => i + 1), 'no gaps, no duplicates');
    assert.ok(final.version >= 41, `at least one version per rename, and the toggles that changed the status: ${final.version}`);
  });

  test('If-Match: a write made from a version the workflow has moved on from is 412, naming the current one; ETag names each version', async () => {
    const created = await create({ name: 'Guarded' });
    const id = created.workflow.id;
    const made = await api('POST', '', { name: 'Tagged', trigger_event: 'payment.succeeded', steps: [hook()] });
    assert.equal(made.headers.get('etag'), '"1"', 'a create answers its ETag too');
    const read = await api('GET', `/${id}`);
    assert.equal(read.headers.get('etag'), '"1"');
    const document = { name: 'Guarded', trigger_event: 'payment.succeeded', steps: [hook()] };
    const guarded = (method: string, path: string, json: unknown, tag: string) => call(rt.url, method, `${base}${path}`, { token: key, json, headers: { 'if-match': tag } });
    // An operator disables it; an editor's full document, made from version 1, must not enable it again.
    const disabled = await guarded('POST', `/${id}/toggle`, { action: 'disable' }, '"1"');
    assert.equal(disabled.status, 200, disabled.text);
    assert.equal(disabled.headers.get('etag'), '"2"');
    const stale = await guarded('PUT', `/${id}`, { ...document, name: 'Guarded, renamed' }, '"1"');
    assert.equal(stale.status, 412, stale.text);
    assert.equal(stale.body.error.code, 'workflow_version_mismatch');
    assert.equal(stale.body.error.current_version, 2);
    assert.equal((await api('GET', `/${id}`)).body.workflow.status, 'disabled', 'nothing written');
    const fresh = await guarded('PATCH', `/${id}`, { name: 'Guarded, renamed' }, '"2"');
    assert.equal(fresh.status, 200, fresh.text);
    assert.deepEqual([fresh.body.workflow.version, fresh.body.workflow.status, fresh.headers.get('etag')], [3, 'disabled', '"3"']);
    assert.equal((await guarded('POST', `/${id}/toggle`, { action: 'enable' }, '"2"')).status, 412);
    assert.equal((await guarded('PATCH', `/${id}`, { name: 'Any' }, '*')).status, 200, '* asks only that it exists');
    assert.equal((await guarded('PATCH', `/${id}`, { name: 'Listed' }, '"9", "4" ,"x"')).status, 200, 'a list naming the current version (4)');
    for (const never of ['W/"5"', '"0"', '"x"', '"5,6"']) {
      const refused = await guarded('PATCH', `/${id}`, { name: 'Never' }, never);
      assert.deepEqual([refused.status, refused.body.error.code], [412, 'workflow_version_mismatch'], `${never}: a weak tag or another value never matches`);
    }
    for (const bad of ['5', '"5" "6"', '"5', ' ']) {
      const refused = await guarded('PATCH', `/${id}`, { name: 'Bad' }, bad);
      assert.deepEqual([refused.status, refused.body.error.code], [400, 'invalid_if_match'], bad);
    }
    // Without the header a write applies onto whatever version is current, as before.
    assert.equal((await api('PATCH', `/${id}`, { name: 'Last writer' })).status, 200);
    // A DELETE too: a stale tag deletes nothing.
    const deleteAt = (tag: string) => call(rt.url, 'DELETE', `${base}/${id}`, { token: key, headers: { 'if-match': tag } });
    const staleDelete = await deleteAt('"5"');
    assert.deepEqual([staleDelete.status, staleDelete.body.error.code, staleDelete.body.error.current_version], [412, 'workflow_version_mismatch', 6]);
    assert.equal((await api('GET', `/${id}`)).status, 200, 'not deleted');
    assert.equal((await deleteAt('"6"')).status, 204);
    assert.equal((await api('GET', `/${id}`)).status, 404);
  });

  test('bad workflow documents get 400 naming the field', async () => {
    const valid = { name: 'n', trigger_event: 'a.b', steps: [hook()] };
    const cases: [Record<string, unknown>, string, string][] = [
      [{ ...valid, steps: [hook(), { type: 'email' }] }, 'unsupported_step_type', 'steps[1].type'],
      [{ ...valid, name: '   ' }, 'invalid_request', 'name'],
      [{ ...valid, environment: 'staging' }, 'invalid_request', 'environment'],
      [{ ...valid, steps: [hook('ftp://example.com/x')] }, 'invalid_url', 'steps[0].url'],
      [{ ...valid, steps: [hook('not a url')] }, 'invalid_url', 'steps[0].url'],
      [{ ...valid, steps: [{ type: 'delay', duration_ms: -5 }] }, 'invalid_duration', 'steps[0].duration_ms'],
      [{ ...valid, steps: [{ type: 'delay', duration: '-PT5M' }] }, 'invalid_duration', 'steps[0].duration'],
      [{ ...valid, steps: Array.from({ length: 51 }, () => hook()) }, 'invalid_request', 'steps'],
      [{ ...valid, steps: [{ id: 'x', ...hook() }, { id: 'x', type: 'delay', duration_ms: 5 }] }, 'duplicate_step_id', 'steps[1].id'],
      [{ ...valid, version: 3 }, 'unknown_field', 'version'],
      [{ name: 'n', steps: [hook()] }, 'invalid_request', 'trigger_event'],
    ];
    for (const [json, code, field] of cases) {
      const answer = await api('POST', '', json);
      assert.equal(answer.status, 400, `${field}: ${answer.text}`);
      assert.equal(answer.body.error.code, code, field);
      assert.equal(answer.body.error.field, field, answer.text);
      assert.equal(typeof answer.body.error.message, 'string');
    }
    const { workflow } = await create();
    const badUpdate = await api('PUT', `/${workflow.id}`, { steps: [hook(), { type: 'sms' }] });
    assert.equal(badUpdate.status, 400);
    assert.equal(badUpdate.body.error.field, 'steps[1].type');
    assert.equal((await api('GET', `/${workflow.id}`)).body.workflow.version, 1, 'a refused update writes nothing');
    assert.equal((await api('GET', '?environment=staging')).body.error.field, 'environment');
    const notJson = await call(rt.url, 'POST', base, { token: key, body: 'x', headers: { 'content-type': 'text/plain' } });
    assert.equal(notJson.status, 415);
  });

  test('a workflow name is at most 200 characters, an emoji counting as one', async () => {
    assert.equal((await api('POST', '', { name: '🚀'.repeat(200), trigger_event: 'payment.succeeded', steps: [hook()] })).status, 201);
    const tooLong = await api('POST', '', { name: '🚀'.repeat(201), trigger_event: 'payment.succeeded', steps: [hook()] });
    assert.deepEqual([tooLong.status, tooLong.body.error.field, tooLong.body.error.message], [400, 'name', 'Field "name" must be at most 200 characters.']);
  });

  test('an update that changes nothing makes no version', async () => {
    const { workflow } = await create({ name: 'Unchanged' });
    for (const body of [{}, { name: 'Unchanged' }, { status: 'enabled', trigger_event: 'payment.succeeded' }]) {
      const answer = await api('PATCH', `/${workflow.id}`, body);
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.body.workflow.version, 1, JSON.stringify(body));
    }
    assert.equal((await api('GET', `/${workflow.id}/versions`)).body.versions.length, 1);
    assert.equal((await api('PATCH', `/${workflow.id}`, { name: 'Changed' })).body.workflow.version, 2);
  });

  test('a viewer sees webhook header values, URL query values and token-like path segments redacted; a developer sees them', async () => {
    const secretUrl = 'https://crm.example/hooks/in?token=s3cr3t&tenant=acme';
    const { workflow } = await create({ name: 'Credentials', steps: [{ id: 'crm', type: 'webhook', url: secretUrl, headers: { Authorization: 'Bearer s3cr3t' } }] });
    const id = workflow.id;
    const answers = [
      (await api('GET', `/${id}`, undefined, viewer)).body.workflow,
      ((await api('GET', '?limit=500', undefined, viewer)).body.workflows as Array<{ id: string }>).find((w) => w.id === id),
      (await api('GET', `/${id}/versions`, undefined, viewer)).body.versions[0].definition,
      (await api('GET', `/${id}/versions/1`, undefined, viewer)).body.version.definition,
    ];
    for (const seen of answers) {
      assert.deepEqual(seen.steps[0].headers, { Authorization: '[redacted]' });
      assert.equal(seen.steps[0].url, 'https://crm.example/hooks/in?token=[redacted]&tenant=[redacted]');
      assert.ok(!JSON.stringify(seen).includes('s3cr3t'));
    }
    // A token in the path (Slack, Discord): segments other than lowercase words are redacted.
    const slack = 'https://hooks.slack.com/services/T0ABC123/B0DEF456/qWeRtYuIoPaSdFgHjKlZxCvB';
    const inPath = await create({ name: 'Path token', steps: [{ id: 'slack', type: 'webhook', url: slack }] });
    const seenPath = (await api('GET', `/${inPath.workflow.id}`, undefined, viewer)).body.workflow.steps[0].url;
    assert.equal(seenPath, 'https://hooks.slack.com/services/[redacted]/[redacted]/[redacted]');
    // A bare query part (`?s3cr3tT0ken`) is a value, not a name.
    const bare = await create({ name: 'Bare query', steps: [{ id: 'bare', type: 'webhook', url: 'https://crm.example/in?BareQ5ecretT0ken987&k=v' }] });
    assert.equal((await api('GET', `/${bare.workflow.id}`, undefined, viewer)).body.workflow.steps[0].url, 'https://crm.example/in?[redacted]&k=[redacted]');
    assert.equal((await api('GET', `/${inPath.workflow.id}`)).body.workflow.steps[0].url, slack);
    const developer = (await api('GET', `/${id}`)).body.workflow;
    assert.deepEqual(developer.steps[0].headers, { Authorization: 'Bearer s3cr3t' });
    assert.equal(developer.steps[0].url, secretUrl);
  });

  test('viewers read but cannot write; other orgs and malformed ids get 404', async () => {
    const { workflow } = await create();
    const id = workflow.id;
    assert.equal((await api('GET', '', undefined, viewer)).status, 200);
    assert.equal((await api('GET', `/${id}`, undefined, viewer)).status, 200);
    assert.equal((await api('GET', `/${id}/versions`, undefined, viewer)).status, 200);
    const writes: [string, string, unknown][] = [
      ['POST', '', { name: 'v', trigger_event: 'a.b', steps: [hook()] }],
      ['PUT', `/${id}`, { name: 'v' }],
      ['PATCH', `/${id}`, { name: 'v' }],
      ['DELETE', `/${id}`, undefined],
      ['POST', `/${id}/toggle`, { action: 'disable' }],
      ['POST', `/${id}/signing-secret/rotate`, undefined],
    ];
    for (const [method, path, json] of writes) {
      const answer = await api(method, path, json, viewer);
      assert.equal(answer.status, 403, `${method} ${path}`);
      assert.equal(answer.body.error.code, 'forbidden');
    }
    assert.equal((await api('GET', `/${id}`)).body.workflow.version, 1, 'nothing was written');

    const foreign = (method: string, path: string, json?: unknown) =>
      call(rt.url, method, `/organizations/acct-other/workflows${path}`, { token: otherKey, ...(json === undefined ? {} : { json }) });
    for (const [method, path, json] of [['GET', `/${id}`], ['PUT', `/${id}`, { name: 'x' }], ['DELETE', `/${id}`], ['GET', `/${id}/versions/1`], ['POST', `/${id}/signing-secret/rotate`]] as const) {
      assert.equal((await foreign(method, path, json)).status, 404, `${method} ${path} from another org`);
    }
    assert.equal((await api('GET', `/${id}`, undefined, otherKey)).status, 404, 'another org\'s key on this org');
    for (const odd of ['not-a-uuid', '00000000-0000-4000-8000-000000000000', 'X'.repeat(3000), id.toUpperCase()]) {
      const answer = await api('GET', `/${odd}`);
      assert.equal(answer.status, 404, odd.slice(0, 40));
      assert.equal(answer.body.error.code, 'not_found');
    }
  });

  test('rotation answers a new secret; the workflow then signs with [new, old]', async () => {
    const { workflow, signing_secret: first } = await create();
    const rotated = await api('POST', `/${workflow.id}/signing-secret/rotate`);
    assert.equal(rotated.status, 200);
    assert.match(rotated.body.signing_secret, SECRET_FORMAT);
    assert.notEqual(rotated.body.signing_secret, first);
    assert.deepEqual(store.signingSecrets('acct-wf', workflow.id), [rotated.body.signing_secret, first]);
    const again = await api('POST', `/${workflow.id}/signing-secret/rotate`);
    assert.deepEqual(store.signingSecrets('acct-wf', workflow.id), [again.body.signing_secret, rotated.body.signing_secret]);
    assert.ok(!(await api('GET', `/${workflow.id}`)).text.includes(again.body.signing_secret.slice(6)));
  });

  test('a rotation sent again with its Idempotency-Key (its answer lost) answers the same secret, replayed, and the previous secret keeps signing', async () => {
    const { workflow, signing_secret: first } = await create();
    const rotate = (headers: Record<string, string>) => call(rt.url, 'POST', `${base}/${workflow.id}/signing-secret/rotate`, { token: key, headers });
    const made = await rotate({ 'idempotency-key': 'rotate-1' });
    assert.equal(made.status, 200, made.text);
    const retried = await rotate({ 'idempotency-key': 'rotate-1' });
    assert.deepEqual([retried.status, retried.body.signing_secret, retried.body.idempotent_replayed, retried.headers.get('idempotent-replayed')], [200, made.body.signing_secret, true, 'true']);
    assert.deepEqual(store.signingSecrets('acct-wf', workflow.id), [made.body.signing_secret, first]);
    const bad = await rotate({ 'idempotency-key': 'has space' });
    assert.deepEqual([bad.status, bad.body.error.code], [400, 'invalid_idempotency_key']);

    // A late retry of rotate-1 after a later rotation: its secret still signs (the previous one), so it is answered, not made again.
    const later = await rotate({ 'idempotency-key': 'rotate-2' });
    assert.equal(later.status, 200, later.text);
    const late = await rotate({ 'idempotency-key': 'rotate-1' });
    assert.deepEqual([late.status, late.body.signing_secret, late.body.idempotent_replayed], [200, made.body.signing_secret, true]);
    assert.deepEqual(store.signingSecrets('acct-wf', workflow.id), [later.body.signing_secret, made.body.signing_secret], 'nothing rotated');
    // Once a third rotation dropped its secret, a retry of rotate-1 is refused: rotating again would drop rotate-2's grace.
    const third = await rotate({ 'idempotency-key': 'rotate-3' });
    const refused = await rotate({ 'idempotency-key': 'rotate-1' });
    assert.deepEqual([refused.status, refused.body.error.code], [409, 'rotation_superseded'], refused.text);
    assert.deepEqual(store.signingSecrets('acct-wf', workflow.id), [third.body.signing_secret, later.body.signing_secret], 'nothing rotated');
  });

  test('a starter org gets 402 sandbox_disabled for anything sandbox, and works in production', async () => {
    const starter = await createOrg(rt.url, ADMIN_TOKEN, 'acct-starter', 'starter');
    const path = '/organizations/acct-starter/workflows';
    const body = { name: 'n', trigger_event: 'a.b', steps: [hook()] };
    const sandboxCreate = await call(rt.url, 'POST', path, { token: starter, json: { ...body, environment: 'sandbox' } });
    assert.equal(sandboxCreate.status, 402);
    assert.equal(sandboxCreate.body.error.code, 'sandbox_disabled');
    assert.equal(sandboxCreate.body.error.field, 'environment');
    assert.equal((await call(rt.url, 'GET', `${path}?environment=sandbox`, { token: starter })).status, 402);
    const production = await call(rt.url, 'POST', path, { token: starter, json: body });
    assert.equal(production.status, 201);
    const id = production.body.workflow.id as string;
    const move = await call(rt.url, 'PATCH', `${path}/${id}`, { token: starter, json: { environment: 'sandbox' } });
    assert.equal(move.status, 400, 'a workflow never changes environment');
    assert.equal(move.body.error.field, 'environment');
    assert.equal((await call(rt.url, 'GET', `${path}/${id}`, { token: starter })).body.workflow.environment, 'production');

    // A pro org that built sandbox workflows and then moved to starter can no longer reach them.
    const sandboxOrg = await createOrg(rt.url, ADMIN_TOKEN, 'acct-downgrade', 'pro');
    const sandboxPath = '/organizations/acct-downgrade/workflows';
    const made = await call(rt.url, 'POST', sandboxPath, { token: sandboxOrg, json: { ...body, environment: 'sandbox' } });
    assert.equal(made.status, 201);
    const org = rt.runtime.context.orgs.get('acct-downgrade');
    assert.ok(org !== undefined);
    await rt.runtime.context.orgs.update(org.id, (stored) => ({ ...stored, plan: 'starter' }));
    const read = await call(rt.url, 'GET', `${sandboxPath}/${made.body.workflow.id}?environment=sandbox`, { token: sandboxOrg });
    assert.equal(read.status, 402);
    assert.equal(read.body.error.code, 'sandbox_disabled');
  });
});
