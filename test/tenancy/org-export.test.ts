// Exporting an organization over the real API (real uWS, LMDB, hook-runner child with Wasmtime): an
// org that used every feature comes out whole, each record once and as an admin's GET of it
// answers, received payloads in their exact text, the same in small pages as in one; nothing of
// another org and no secret (source secrets, API keys and their hashes, device tokens, signing
// secrets) is in it; only its admins (and the platform admin) may read it, and a cursor is bound to
// its org's export.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { call, newStandardSecret } from '../helpers/http.ts';
import { populateOrg, startPopulatingRuntime, type PopulatingRuntime } from '../helpers/populated-org.ts';
import { eventually, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'exported-p3v';
const OTHER = 'other-p3v';
const SECRET = newStandardSecret();
const OTHER_SECRET = newStandardSecret();
/**
 * A payload whose number no JavaScript number holds, sent pretty-printed: the export carries its text
 * as received, but for its line breaks, which become spaces so that it stays on its line.
 */
const EXACT_PAYLOAD = '{\n  "amount": 123456789012345678901234567890,\r\n  "note": "caf\\u00e9"\r}';
const EXPORTED_PAYLOAD = '{   "amount": 123456789012345678901234567890,   "note": "caf\\u00e9" }';
let world: PopulatingRuntime;
let rt: TestRuntime;
let receiver: Receiver;
let scorer: Buffer;

before(async () => {
  world = await startPopulatingRuntime();
  ({ rt, receiver, scorer } = world);
});
after(() => world.close());

interface Exported {
  /** Every line but the pages' trailers, as sent. */
  readonly lines: string[];
  readonly pages: number;
}

/** Reads the org's export page by page, as `sluice export` does. */
async function exportAll(org: string, token: string, limit?: number): Promise<Exported> {
  const lines: string[] = [];
  let pages = 0;
  let cursor: string | undefined;
  for (;;) {
    const query = new URLSearchParams({ ...(limit === undefined ? {} : { limit: String(limit) }), ...(cursor === undefined ? {} : { cursor }) });
    const answer = await call(rt.url, 'GET', `/organizations/${org}/export?${query}`, { token });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.headers.get('content-type'), 'application/x-ndjson');
    assert.ok(answer.text.endsWith('\n'));
    pages++;
    const pageLines = answer.text.slice(0, -1).split('\n');
    const trailer = JSON.parse(pageLines.pop()!) as { kind: string; next_cursor?: string };
    lines.push(...pageLines);
    if (trailer.kind === 'end') return { lines, pages };
    assert.equal(trailer.kind, 'more');
    cursor = trailer.next_cursor;
  }
}

const parsed = (lines: readonly string[]) => lines.map((line) => JSON.parse(line) as { kind: string } & Record<string, any>);
const ofKind = (lines: readonly string[], kind: string) => parsed(lines).filter((line) => line.kind === kind);
const sorted = (values: Iterable<string>): string[] => [...values].sort();

/** Every item of a list endpoint in both environments. */
async function listBoth(org: string, token: string, path: string, field: string): Promise<any[]> {
  const items = [];
  for (const environment of ['production', 'sandbox']) {
    let cursor: string | null = null;
    do {
      const answer = await call(rt.url, 'GET', `/organizations/${org}/${path}?environment=${environment}&limit=500${cursor === null ? '' : `&cursor=${cursor}`}`, { token });
      assert.equal(answer.status, 200, answer.text);
      items.push(...answer.body[field]);
      cursor = answer.body.next_cursor;
    } while (cursor !== null);
  }
  return items;
}

test('an org comes out whole, each record once, as its admin reads it, with nothing of another org and no secret', async () => {
  const org = await populateOrg({ url: rt.url, receiverUrl: receiver.url, scorer, secret: SECRET }, ORG);
  const other = await populateOrg({ url: rt.url, receiverUrl: receiver.url, scorer, secret: OTHER_SECRET }, OTHER);
  const signed = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: org.key, json: { name: 'signed', trigger_event: 'exact.sent', steps: [{ id: 'tell', type: 'webhook', url: `${receiver.url}/exact` }] } });
  assert.equal(signed.status, 201, signed.text);
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: org.key, body: `{"type":"exact.sent","id":"exact-1","payload":${EXACT_PAYLOAD}}`, headers: { 'content-type': 'application/json' } });
  assert.equal(sent.status, 202, sent.text);
  await eventually('exact run done', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/exact-1`, { token: org.key })).body.reactions as Array<{ state: string }>, (r) => r.length === 1 && r[0]!.state === 'completed');
  org.live.close();
  org.meter.close();
  other.live.close();
  other.meter.close();
  // The device's disconnection is written once the server sees the close.
  await eventually('meter disconnected', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/devices/meter-1`, { token: org.key })).body.device.state, (state) => state === 'disconnected');

  // A version no run read (the runs keep the versions they read decoded, a bounded set): the export reads it past that set.
  const renamed = await call(rt.url, 'PATCH', `/organizations/${ORG}/workflows/${signed.body.workflow.id}`, { token: org.key, json: { name: 'signed, renamed' } });
  assert.equal(renamed.status, 200, renamed.text);
  const pinned = rt.runtime.workflows.pinnedHeld.versions;

  const whole = await exportAll(ORG, org.key);
  assert.equal(rt.runtime.workflows.pinnedHeld.versions, pinned, 'the export keeps no version decoded');
  const text = whole.lines.join('\n');
  const [header, organization] = parsed(whole.lines);
  assert.equal(header!.kind, 'export');
  assert.equal(header!.format, 1);
  assert.equal(header!.organization_id, ORG);
  assert.equal(organization!.kind, 'organization');
  assert.deepEqual(organization!.organization, (await call(rt.url, 'GET', `/organizations/${ORG}`, { token: org.key })).body.organization);

  // Each kind holds what the API lists, once.
  const keys = ofKind(whole.lines, 'api_key').map((line) => line.api_key);
  assert.deepEqual(keys, (await call(rt.url, 'GET', `/organizations/${ORG}/api-keys?limit=500`, { token: org.key })).body.api_keys);
  assert.equal(keys.length, 3);
  assert.equal(keys.filter((key) => key.revoked_at !== undefined).length, 1);
  assert.deepEqual(ofKind(whole.lines, 'source').map((line) => line.source), await listBoth(ORG, org.key, 'sources', 'sources'));
  const [schedule] = ofKind(whole.lines, 'schedule');
  assert.equal(schedule!.schedule.name, 'nightly');
  assert.equal(schedule!.schedule.next_tick_at, (await call(rt.url, 'GET', `/organizations/${ORG}/schedules/nightly`, { token: org.key })).body.schedule.next_tick_at);
  assert.deepEqual(ofKind(whole.lines, 'device').map((line) => line.device), await listBoth(ORG, org.key, 'devices', 'devices'));
  const workflows = ofKind(whole.lines, 'workflow').map((line) => line.workflow);
  assert.deepEqual(sorted(workflows.map((workflow) => workflow.id)), sorted((await listBoth(ORG, org.key, 'workflows', 'workflows')).map((workflow) => workflow.id)));
  assert.equal(workflows.length, 4);
  const versions = ofKind(whole.lines, 'workflow_version').map((line) => line.version);
  assert.deepEqual(sorted(versions.map((version) => `${version.workflow_id} v${version.version}`)), sorted([...workflows.map((workflow) => `${workflow.id} v1`), `${signed.body.workflow.id} v2`]));
  const [action] = ofKind(whole.lines, 'custom_action');
  assert.deepEqual(action!.custom_action, (await call(rt.url, 'GET', `/organizations/${ORG}/custom-actions/${org.actionId}`, { token: org.key })).body.custom_action);
  assert.deepEqual(action!.secret_keys, ['RISK_THRESHOLD']);
  const [module] = ofKind(whole.lines, 'custom_action_module');
  const moduleBytes = Buffer.from(module!.module.base64, 'base64');
  assert.deepEqual(moduleBytes, scorer);
  assert.equal(module!.module.digest, createHash('sha256').update(scorer).digest('hex'));
  assert.equal(module!.module.digest, action!.custom_action.versions[0].digest);

  const events = ofKind(whole.lines, 'event');
  const listedEvents = await listBoth(ORG, org.key, 'events', 'events');
  assert.deepEqual(sorted(events.map((line) => line.event.id)), sorted(listedEvents.map((event) => event.id)));
  assert.ok(events.length >= 9, `events: ${events.length}`);
  for (const line of events) {
    const shown = await call(rt.url, 'GET', `/organizations/${ORG}/events/${line.event.id}?environment=${line.event.environment}`, { token: org.key });
    assert.deepEqual({ event: line.event, recording: line.recording }, { event: shown.body.event, recording: shown.body.recording });
  }
  assert.ok(events.some((line) => line.recording !== null), 'the webhook event comes with its recording');
  // The payload as received, digit for digit (JSON.parse above rounded it), on one line.
  assert.ok(text.includes(`"payload":${EXPORTED_PAYLOAD}`), 'the exact payload text');

  const runs = ofKind(whole.lines, 'run');
  const listedRuns = await listBoth(ORG, org.key, 'runs', 'runs');
  assert.deepEqual(sorted(runs.map((line) => line.run.run_id)), sorted(listedRuns.map((run) => run.run_id)));
  assert.ok(runs.length >= 7, `runs: ${runs.length}`);
  for (const line of runs) {
    const shown = await call(rt.url, 'GET', `/organizations/${ORG}/runs/${line.run.run_id}?environment=${line.run.environment}`, { token: org.key });
    assert.deepEqual(line.run, shown.body.run);
  }
  const rows = ofKind(whole.lines, 'projection_row').map((line) => line.row);
  assert.ok(rows.length >= 1);
  for (const row of rows) {
    const shown = await call(rt.url, 'GET', `/organizations/${ORG}/projections/${row.name}/${row.entity_type}/${encodeURIComponent(row.entity_id)}?environment=${row.environment}`, { token: org.key });
    assert.deepEqual(row, shown.body.row);
  }
  const kinds = new Set(parsed(whole.lines).map((line) => line.kind));
  assert.deepEqual(sorted(kinds), sorted(['export', 'organization', 'api_key', 'source', 'schedule', 'device', 'workflow', 'workflow_version', 'custom_action', 'custom_action_module', 'event', 'run', 'projection_row']));

  // Nothing of the other org, and no secret.
  assert.ok(!text.includes(OTHER), 'nothing names the other org');
  for (const secret of [SECRET, SECRET.slice('whsec_'.length), org.key, org.viewer, org.deviceToken, createHash('sha256').update(org.key).digest('hex'), signed.body.signing_secret as string]) {
    assert.ok(!text.includes(secret), `a secret is in the export: ${secret.slice(0, 8)}...`);
  }

  // In pages of 3 records: the same lines (but the header's time), in the same order.
  const paged = await exportAll(ORG, org.key, 3);
  assert.ok(paged.pages >= Math.ceil(whole.lines.length / 3), `pages: ${paged.pages}`);
  assert.deepEqual(paged.lines.slice(1), whole.lines.slice(1));
  assert.equal(whole.pages, 1);
});

/** A cursor of `position` bound to the export at `path`, as the server makes them (query-params.ts). */
const scoped = (path: string, position: unknown[]): string =>
  Buffer.from(JSON.stringify([...position, createHash('sha256').update(JSON.stringify([path, []])).digest('base64url').slice(0, 16)])).toString('base64url');

test('only admins of the org and the platform admin read its export; a cursor belongs to one export', async () => {
  const { key, viewer, live, meter } = await populateOrg({ url: rt.url, receiverUrl: receiver.url, scorer, secret: newStandardSecret() }, 'guarded-p3v');
  live.close();
  meter.close();
  const developer = (await call(rt.url, 'POST', '/organizations/guarded-p3v/api-keys', { token: key, json: { role: 'developer' } })).body.key as string;
  for (const token of [viewer, developer]) {
    const refused = await call(rt.url, 'GET', '/organizations/guarded-p3v/export', { token });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'forbidden');
  }
  const otherAdmin = (await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'stranger-p3v', name: 'stranger' } })).body.api_key as string;
  assert.equal((await call(rt.url, 'GET', '/organizations/guarded-p3v/export', { token: otherAdmin })).status, 404);
  assert.equal((await call(rt.url, 'GET', '/organizations/guarded-p3v/export')).status, 401);
  const asPlatform = await call(rt.url, 'GET', '/organizations/guarded-p3v/export?limit=2', { token: ADMIN_TOKEN });
  assert.equal(asPlatform.status, 200);
  const trailer = JSON.parse(asPlatform.text.trim().split('\n').at(-1)!) as { kind: string; next_cursor: string };
  assert.equal(trailer.kind, 'more');

  // The cursor goes on with this org's export only; anything else is a 400 naming the cursor.
  const next = await call(rt.url, 'GET', `/organizations/guarded-p3v/export?limit=2&cursor=${trailer.next_cursor}`, { token: key });
  assert.equal(next.status, 200);
  // The forged cursors below are refused for their position alone: one made the same way with a position of the export is taken.
  assert.equal((await call(rt.url, 'GET', `/organizations/guarded-p3v/export?cursor=${scoped('/organizations/guarded-p3v/export', [2, ['key_']])}`, { token: key })).status, 200);
  for (const [path, cursor] of [
    ['/organizations/stranger-p3v/export', trailer.next_cursor],
    ['/organizations/guarded-p3v/export', 'not-a-cursor'],
    ['/organizations/guarded-p3v/export', Buffer.from(JSON.stringify([99, null, 'x'])).toString('base64url')],
    // Of this export's own scope, but no position of it: no section 99, a key part too long to name anything, keys for the header.
    ...[[99, null], [2, ['x'.repeat(801)]], [0, ['a']], [2, [{}]]].map((position) => ['/organizations/guarded-p3v/export', scoped('/organizations/guarded-p3v/export', position)]),
  ]) {
    const refused = await call(rt.url, 'GET', `${path}?cursor=${cursor}`, { token: ADMIN_TOKEN });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.body.error.code, 'invalid_cursor');
  }
  for (const limit of ['0', '501', 'x']) assert.equal((await call(rt.url, 'GET', `/organizations/guarded-p3v/export?limit=${limit}`, { token: key })).body.error.code, 'invalid_limit');
  assert.equal((await call(rt.url, 'GET', '/organizations/guarded-p3v/export?environment=sandbox', { token: key })).status, 400);
});
