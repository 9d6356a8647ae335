// Hostile path and query input is a 4xx naming the field (DESIGN 8), never a 500: oversized path
// parameters, projection names and filters outside DESIGN 6.5, and cursors of any other shape.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { MAX_PATH_PARAM_BYTES } from '../../runtime/http/router.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import type { ProjectionWrite } from '../../runtime/actions/output-contract.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, type CallResult } from '../helpers/http.ts';

const ORG = 'acct-hostile';
const base = `/organizations/${ORG}`;
const long = 'a'.repeat(3000);
const cursor = (position: unknown): string => Buffer.from(JSON.stringify(position)).toString('base64url');
/** The longest entity_id DESIGN 6.5 allows, in characters of 4 UTF-8 bytes each (400 UTF-16 units): the widest a path must carry. */
const WIDE_ENTITY_ID = '😀'.repeat(200);

let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  const store = new ProjectionStore(rt.runtime.ledger);
  const write = (projection: ProjectionWrite, stepId: string) =>
    store.write(projection, { orgId: ORG, environment: 'production', runId: 'run_0123456789abcdef0123456789abcdef', stepId, eventId: 'evt_1', at: 1 });
  const row = { title: null, status: 'ok', data: null };
  await durably(rt.runtime.ledger.root, rt.runtime.ledger.root.transaction(() => {
    write({ name: 'audit', entity: null, ...row }, 's1');
    write({ name: 'audit', entity: null, ...row }, 's2');
    write({ name: 'orders', entity: { type: 'order', id: WIDE_ENTITY_ID }, ...row }, 's3');
  }));
});
after(async () => rt.close());

const get = (path: string): Promise<CallResult> => call(rt.url, 'GET', `${base}${path}`, { token: key });

function assertError(answer: CallResult, status: number, field: string, what: string): void {
  assert.equal(answer.status, status, `${what}: ${answer.text.slice(0, 200)}`);
  assert.equal(answer.body?.error?.field, field, what);
}

test('a path parameter too long to name anything is a 404 naming it, on every route', async () => {
  const cases: Array<[method: string, path: string, field: string]> = [
    ['GET', `${base}/runs/${long}`, 'run_id'],
    ['POST', `${base}/runs/${long}/cancel`, 'run_id'],
    ['GET', `${base}/workflows/${long}`, 'workflow_id'],
    ['GET', `${base}/events/${long}`, 'event_id'],
    ['POST', `${base}/events/${long}/replay`, 'event_id'],
    ['GET', `${base}/sources/${long}`, 'name'],
    ['GET', `${base}/custom-actions/${long}`, 'action_id'],
    ['DELETE', `${base}/api-keys/${long}`, 'key_id'],
    ['GET', `${base}/projections/${long}`, 'name'],
    ['GET', `${base}/projections/p/t/${long}`, 'entity_id'],
    ['GET', `/organizations/${long}/runs`, 'org_id'],
    ['POST', `/hooks/${ORG}/${long}`, 'source'],
  ];
  for (const [method, path, field] of cases) {
    const answer = await call(rt.url, method, path, { token: key, ...(method === 'POST' ? { json: {} } : {}) });
    assertError(answer, 404, field, `${method} ${path.slice(0, 60)}`);
    // The shared check answered, before any handler built a storage key from the parameter.
    assert.match(answer.body.error.message, new RegExp(`limit is ${MAX_PATH_PARAM_BYTES}\\b`));
  }
});

test('a projection name or entity outside DESIGN 6.5 is a 404; the longest valid entity_id is readable', async () => {
  assertError(await get(`/projections/${'a'.repeat(121)}`), 404, 'name', 'name of 121 characters');
  assertError(await get('/projections/Orders'), 404, 'name', 'upper-case name');
  assertError(await get(`/projections/${'a'.repeat(121)}/order/1`), 404, 'name', 'row under a bad name');
  assertError(await get(`/projections/orders/${'t'.repeat(65)}/1`), 404, 'entity_type', 'entity_type of 65 characters');
  assertError(await get('/projections/orders/~step/run_x:s1'), 404, 'entity_type', 'the appended rows marker');
  assertError(await get(`/projections/orders/order/${'1'.repeat(201)}`), 404, 'entity_id', 'entity_id of 201 characters');
  const row = await get(`/projections/orders/order/${encodeURIComponent(WIDE_ENTITY_ID)}`);
  assert.equal(row.status, 200, row.text.slice(0, 200));
  assert.equal(row.body.row.entity_id, WIDE_ENTITY_ID);
});

test('projection list filters outside DESIGN 6.5 are a 400 naming the parameter', async () => {
  assertError(await get(`/projections/orders?entity_type=${long}`), 400, 'entity_type', 'entity_type of 3000 characters');
  assertError(await get('/projections/orders?entity_type=Order'), 400, 'entity_type', 'upper-case entity_type');
  assertError(await get(`/projections/orders?status=${'s'.repeat(41)}`), 400, 'status', 'status of 41 characters');
  const listed = await get('/projections/orders?entity_type=order&status=ok');
  assert.equal(listed.status, 200);
  assert.deepEqual(listed.body.rows.map((r: { entity_id: string }) => r.entity_id), [WIDE_ENTITY_ID]);
});

test('runs?workflow_id= that is not a workflow id is a 400', async () => {
  assertError(await get(`/runs?workflow_id=${long}`), 400, 'workflow_id', 'workflow_id of 3000 characters');
  assertError(await get('/runs?workflow_id=nope'), 400, 'workflow_id', 'malformed workflow_id');
  assert.equal((await get('/runs?workflow_id=00000000-0000-4000-8000-000000000000')).status, 200);
});

test('a time-list cursor of any shape but [time, id] is a 400 invalid_cursor', async () => {
  const bad: unknown[] = [
    [1, 'a', {}], [1, 'a', 'b'], [1], [], [1, long], [1, ''], [1, 'bad id'], ['1', 'a'], [-1, 'a'], [1.5, 'a'], [1e300, 'a'], [null, 'a'], { 0: 1, 1: 'a' }, 'x',
  ];
  for (const list of ['runs', 'events']) {
    for (const position of bad) {
      const answer = await get(`/${list}?cursor=${cursor(position)}`);
      assertError(answer, 400, 'cursor', `${list} cursor ${JSON.stringify(position).slice(0, 40)}`);
      assert.equal(answer.body.error.code, 'invalid_cursor');
    }
    assertError(await get(`/${list}?cursor=${'A'.repeat(5000)}`), 400, 'cursor', `${list} cursor of 5000 characters`);
  }
  for (const id of ['first', 'second']) {
    assert.equal((await call(rt.url, 'POST', `${base}/events`, { token: key, json: { type: 'a.b', payload: {}, id } })).status, 202);
  }
  const first = await get('/events?limit=1');
  assert.equal(first.body.events.length, 1);
  const next = await get(`/events?limit=1&cursor=${first.body.next_cursor}`);
  assert.equal(next.status, 200, 'a next_cursor the API handed out is still accepted');
  assert.equal(next.body.events.length, 1);
  assert.notEqual(next.body.events[0].id, first.body.events[0].id);
});

test('a projection cursor of any shape but [entity_type, entity_id] is a 400 invalid_cursor', async () => {
  const bad: unknown[] = [['order', long], ['order', 'x', {}], ['order'], [1, 'x'], ['Order', 'x'], ['order', ''], ['order', 'x'.repeat(201)], [long, 'x']];
  for (const position of bad) {
    const answer = await get(`/projections/audit?cursor=${cursor(position)}`);
    assertError(answer, 400, 'cursor', `projection cursor ${JSON.stringify(position).slice(0, 40)}`);
    assert.equal(answer.body.error.code, 'invalid_cursor');
  }
  // Appended rows page by their step key under the marker entity type: those cursors stay valid.
  const first = await get('/projections/audit?limit=1');
  assert.equal(first.body.rows.length, 1);
  const next = await get(`/projections/audit?limit=1&cursor=${first.body.next_cursor}`);
  assert.equal(next.status, 200, next.text.slice(0, 200));
  assert.equal(next.body.rows.length, 1);
  assert.notEqual(next.body.rows[0].step_id, first.body.rows[0].step_id);
});

test('events?source= that no source could be is a 400 naming the parameter', async () => {
  assertError(await get(`/events?source=${long}`), 400, 'source', 'source of 3000 characters');
  assertError(await get('/events?source=has%20space'), 400, 'source', 'source with a space');
  const listed = await get('/events?source=%40api');
  assert.equal(listed.status, 200, listed.text);
});

test('events?type= that no event type could be is a 400 naming the parameter', async () => {
  for (const type of ['has%20space', '', '__proto__', 'a'.repeat(129)]) assertError(await get(`/events?type=${type}`), 400, 'type', `type "${type.slice(0, 20)}"`);
  const listed = await get('/events?type=order.placed');
  assert.equal(listed.status, 200, listed.text);
});
