// Organizations and API keys over real HTTP: creation, roles, revocation and tenant isolation.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

let rt: TestRuntime;
before(async () => {
  rt = await startRuntime();
});
after(async () => rt.close());

test('the platform admin creates an org and receives a first admin key', async () => {
  const created = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'acct-lumen', name: 'Lumen', plan: 'pro' } });
  assert.equal(created.status, 201);
  assert.equal(created.body.organization.id, 'acct-lumen');
  assert.equal(created.body.organization.plan, 'pro');
  assert.equal(created.body.organization.max_concurrent_runs, 4);
  assert.match(created.body.api_key, /^sk_/);
  const fetched = await call(rt.url, 'GET', '/organizations/acct-lumen', { token: created.body.api_key });
  assert.equal(fetched.status, 200);
  assert.equal(fetched.body.organization.name, 'Lumen');
  const again = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'acct-lumen', name: 'Other' } });
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, 'organization_exists');
});

test('creating an org needs the platform admin token, and a valid body', async () => {
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-noadmin');
  for (const token of [undefined, 'not-the-admin-token']) {
    const refused = await call(rt.url, 'POST', '/organizations', { ...(token === undefined ? {} : { token }), json: { id: 'x1', name: 'X' } });
    assert.equal(refused.status, 401);
    assert.match(refused.body.error.message, /platform admin token is required/, 'it names the token it needs, not an API key');
    // A change of an org's plan or limits is the platform admin's too, and says so.
    const patch = await call(rt.url, 'PATCH', '/organizations/acct-noadmin', { ...(token === undefined ? {} : { token }), json: { plan: 'pro' } });
    assert.equal(patch.status, 401);
    assert.match(patch.body.error.message, /platform admin token is required/, 'PATCH names the token it needs');
  }
  const withKey = await call(rt.url, 'POST', '/organizations', { token: orgKey, json: { id: 'x2', name: 'X' } });
  assert.deepEqual([withKey.status, withKey.body.error.code], [403, 'forbidden'], 'a valid key that is not the platform admin is forbidden, not unauthenticated');
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-noadmin', { token: orgKey, json: { name: 'Mine' } })).status, 403);
  const bad = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'Ünïcode', name: 'X' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.field, 'id');
  for (const name of ['\u0000\u0007   ', '   ', 'tab\there']) {
    const badName = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'x5', name } });
    assert.deepEqual([badName.status, badName.body.error.field], [400, 'name'], JSON.stringify(name));
    assert.equal(badName.body.error.message, 'Field "name" must be text that is not only white space, without control characters (tabs, line breaks).', 'said in words, not as the regex');
  }
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-noadmin', { token: ADMIN_TOKEN, json: { name: ' ' } })).status, 400);
  assert.equal((await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'x6', name: 'Lumen Café 2' } })).status, 201);
  const plan = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'x3', name: 'X', plan: 'gold' } });
  assert.equal(plan.status, 400);
  assert.equal(plan.body.error.field, 'plan');
  const extra = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'x4', name: 'X', plna: 'pro' } });
  assert.equal(extra.status, 400);
  assert.equal(extra.body.error.code, 'unknown_field');
  assert.equal(extra.body.error.field, 'plna');
});

test('API keys: admin creates, lists and revokes; roles are enforced', async () => {
  const admin = await createOrg(rt.url, ADMIN_TOKEN, 'acct-roles');
  const viewer = await call(rt.url, 'POST', '/organizations/acct-roles/api-keys', { token: admin, json: { role: 'viewer' } });
  assert.equal(viewer.status, 201);
  assert.equal(viewer.body.role, 'viewer');
  assert.match(viewer.body.key, /^sk_/);
  const developer = await call(rt.url, 'POST', '/organizations/acct-roles/api-keys', { token: admin, json: { role: 'developer' } });
  assert.equal(developer.status, 201);

  const listed = await call(rt.url, 'GET', '/organizations/acct-roles/api-keys', { token: admin });
  assert.equal(listed.status, 200);
  assert.equal(listed.body.api_keys.length, 3);
  assert.ok(!listed.text.includes(viewer.body.key), 'key text is never listed');
  assert.ok(!listed.text.includes('hash'), 'hashes are never listed');

  assert.equal((await call(rt.url, 'GET', '/organizations/acct-roles', { token: viewer.body.key })).status, 200);
  const forbidden = await call(rt.url, 'POST', '/organizations/acct-roles/api-keys', { token: developer.body.key, json: { role: 'admin' } });
  assert.equal(forbidden.status, 403);
  assert.equal(forbidden.body.error.code, 'forbidden');
  const viewerWrite = await call(rt.url, 'POST', '/organizations/acct-roles/events', { token: viewer.body.key, json: { type: 'a.b', payload: {} } });
  assert.equal(viewerWrite.status, 403);

  const revoked = await call(rt.url, 'DELETE', `/organizations/acct-roles/api-keys/${viewer.body.id}`, { token: admin });
  assert.equal(revoked.status, 200);
  assert.ok(revoked.body.api_key.revoked_at);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-roles', { token: viewer.body.key })).status, 401);
  assert.equal((await call(rt.url, 'DELETE', '/organizations/acct-roles/api-keys/key_nope', { token: admin })).status, 404);
  const badRole = await call(rt.url, 'POST', '/organizations/acct-roles/api-keys', { token: admin, json: { role: 'owner' } });
  assert.equal(badRole.status, 400);
  assert.equal(badRole.body.error.field, 'role');
});

test('a key of org A gets 404 for anything of org B; no key is 401', async () => {
  const keyA = await createOrg(rt.url, ADMIN_TOKEN, 'acct-a');
  await createOrg(rt.url, ADMIN_TOKEN, 'acct-b');
  for (const path of ['/organizations/acct-b', '/organizations/acct-b/sources', '/organizations/acct-b/events', '/organizations/acct-b/api-keys']) {
    const answer = await call(rt.url, 'GET', path, { token: keyA });
    assert.equal(answer.status, 404, path);
    assert.equal(answer.body.error.code, 'not_found');
  }
  const missing = await call(rt.url, 'GET', '/organizations/acct-nonexistent', { token: keyA });
  assert.equal(missing.status, 404);
  assert.deepEqual(missing.body, (await call(rt.url, 'GET', '/organizations/acct-b', { token: keyA })).body, 'other org and no org look the same');
  // Platform-admin endpoints too: another org's (or no org's) is a 404, the key's own a 403.
  for (const [method, path] of [['PATCH', '/organizations/acct-b'], ['DELETE', '/organizations/acct-b'], ['GET', '/organizations/acct-b/deletion'], ['DELETE', '/organizations/acct-nonexistent'], ['GET', '/organizations/acct-nonexistent/deletion']] as const) {
    const answer = await call(rt.url, method, path, { token: keyA, ...(method === 'PATCH' ? { json: { name: 'B' } } : {}) });
    assert.deepEqual([answer.status, answer.body.error?.code], [404, 'not_found'], `${method} ${path}`);
  }
  for (const [method, path] of [['PATCH', '/organizations/acct-a'], ['DELETE', '/organizations/acct-a'], ['GET', '/organizations/acct-a/deletion']] as const) {
    const answer = await call(rt.url, method, path, { token: keyA, ...(method === 'PATCH' ? { json: { name: 'A' } } : {}) });
    assert.deepEqual([answer.status, answer.body.error?.code], [403, 'forbidden'], `${method} ${path}`);
  }
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-b', { token: ADMIN_TOKEN })).status, 200, 'B is still there');
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-a')).status, 401);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-a', { token: 'sk_forged' })).status, 401);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-a', { headers: { authorization: 'Basic abc' } })).status, 401);
});

test('an org holds at most 100 active API keys; revoking one makes room', async () => {
  const admin = await createOrg(rt.url, ADMIN_TOKEN, 'acct-many-keys');
  const base = '/organizations/acct-many-keys/api-keys';
  const created = await Promise.all(Array.from({ length: 99 }, () => call(rt.url, 'POST', base, { token: admin, json: { role: 'viewer' } })));
  assert.ok(created.every((answer) => answer.status === 201), 'the first admin key plus 99 more');
  const over = await call(rt.url, 'POST', base, { token: admin, json: { role: 'viewer' } });
  assert.equal(over.status, 409);
  assert.equal(over.body.error.code, 'too_many_api_keys');
  assert.equal((await call(rt.url, 'DELETE', `${base}/${created[0]!.body.id}`, { token: admin })).status, 200);
  assert.equal((await call(rt.url, 'POST', base, { token: admin, json: { role: 'viewer' } })).status, 201);
  assert.equal((await call(rt.url, 'GET', `${base}?limit=500`, { token: admin })).body.api_keys.length, 101, 'the revoked key stays listed');
});

test('a plan change brings the new plan\'s ingest rate, unless the same request sets one', async () => {
  await createOrg(rt.url, ADMIN_TOKEN, 'acct-plans', 'pro');
  const patch = async (json: Record<string, unknown>) => {
    const answer = await call(rt.url, 'PATCH', '/organizations/acct-plans', { token: ADMIN_TOKEN, json });
    assert.equal(answer.status, 200, answer.text);
    return answer.body.organization.ingest_rate_per_second as number | null;
  };
  assert.equal(await patch({ plan: 'starter' }), 100, 'down to starter: capped');
  assert.equal(await patch({ plan: 'pro' }), null, 'back to pro: unlimited');
  assert.equal(await patch({ plan: 'starter', ingest_rate_per_second: 250 }), 250, 'a rate given with the plan wins');
  assert.equal(await patch({ name: 'Renamed' }), 250, 'no plan change: the rate stays');
  assert.equal(await patch({ plan: 'starter' }), 250, 'the same plan again: the rate stays');
});

test('the API key list comes in pages with a cursor that visits each key once, revoked ones included', async () => {
  const admin = await createOrg(rt.url, ADMIN_TOKEN, 'acct-key-pages');
  const made = [];
  for (let i = 0; i < 7; i++) made.push((await call(rt.url, 'POST', '/organizations/acct-key-pages/api-keys', { token: admin, json: { role: 'viewer' } })).body.id as string);
  assert.equal((await call(rt.url, 'DELETE', `/organizations/acct-key-pages/api-keys/${made[0]}`, { token: admin })).status, 200);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor === null ? '?limit=3' : `?limit=3&cursor=${cursor}`;
    const page = await call(rt.url, 'GET', `/organizations/acct-key-pages/api-keys${query}`, { token: admin });
    assert.equal(page.status, 200, page.text);
    assert.ok(page.body.api_keys.length <= 3);
    seen.push(...page.body.api_keys.map((k: { id: string }) => k.id));
    cursor = page.body.next_cursor;
  } while (cursor !== null);
  assert.equal(seen.length, 8, 'the first key and seven more');
  assert.equal(new Set(seen).size, 8);
  for (const id of made) assert.ok(seen.includes(id), id);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-key-pages/api-keys?limit=0', { token: admin })).status, 400);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-key-pages/api-keys?cursor=bogus', { token: admin })).status, 400);
});

test('the active-key cap counts active keys only, also for keys written before its index (filled once, on the next create)', async () => {
  const admin = await createOrg(rt.url, ADMIN_TOKEN, 'acct-key-index');
  const base = '/organizations/acct-key-index/api-keys';
  const made = await Promise.all(Array.from({ length: 9 }, () => call(rt.url, 'POST', base, { token: admin, json: { role: 'viewer' } })));
  for (const answer of made.slice(0, 5)) assert.equal((await call(rt.url, 'DELETE', `${base}/${answer.body.id}`, { token: admin })).status, 200);
  // As a ledger from before the index holds them: no index entries, no marker.
  const active = rt.runtime.ledger.openDatabase('api-keys-active');
  await rt.runtime.ledger.root.transaction(() => {
    for (const key of [...active.getKeys({ start: ['acct-key-index'], end: ['acct-key-index', '\uffff'] })]) active.remove(key);
  });
  // 1 admin + 4 active viewers: 95 more fit, and not one more.
  const more = await Promise.all(Array.from({ length: 95 }, () => call(rt.url, 'POST', base, { token: admin, json: { role: 'viewer' } })));
  assert.deepEqual([...new Set(more.map((answer) => answer.status))], [201]);
  assert.equal((await call(rt.url, 'POST', base, { token: admin, json: { role: 'viewer' } })).body.error?.code, 'too_many_api_keys');
});

test('no key, or an unknown one, is 401 before anything else of the request is checked: query parameters, a DELETE body', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-401-first');
  const requests: Array<[string, string, { json?: unknown; headers?: Record<string, string> }]> = [
    ['GET', '/organizations/acct-401-first?x=1', {}],
    ['GET', '/organizations/acct-401-first/runs/run_x?x=1', {}],
    ['GET', '/organizations/acct-401-first/events?x=1&x=2', {}],
    ['POST', '/organizations/acct-401-first/events?x=1&x=2', { json: {} }],
    ['DELETE', '/organizations/acct-401-first/api-keys/key_x', { json: {} }],
  ];
  for (const [method, path, options] of requests) {
    for (const token of [undefined, 'sk_unknown_key_1234567890']) {
      const answer = await call(rt.url, method, path, { ...options, ...(token === undefined ? {} : { token }) });
      assert.deepEqual([answer.status, answer.body.error.code], [401, 'unauthorized'], `${method} ${path} ${token ?? 'no key'}`);
    }
  }
  // With the key, the request's own shape is what is wrong.
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-401-first?x=1', { token: key })).body.error.code, 'unknown_query_parameter');
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-401-first/events?limit=1&limit=2', { token: key })).body.error.code, 'repeated_query_parameter');
});

test('the platform admin lists every org in id order, paged; an org key is forbidden', async () => {
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-list-z');
  await createOrg(rt.url, ADMIN_TOKEN, 'acct-list-a');
  const all = await call(rt.url, 'GET', '/organizations?limit=500', { token: ADMIN_TOKEN });
  assert.equal(all.status, 200, all.text);
  const ids = (all.body.organizations as Array<{ id: string }>).map((org) => org.id);
  assert.deepEqual(ids, [...ids].sort(), 'in id order');
  assert.ok(ids.includes('acct-list-a') && ids.includes('acct-list-z'));
  assert.equal(all.body.next_cursor, null);
  assert.equal(all.body.organizations.find((org: { id: string }) => org.id === 'acct-list-a').plan, 'pro');

  const paged: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; text: string; body: { organizations: Array<{ id: string }>; next_cursor: string | null } } = await call(rt.url, 'GET', `/organizations?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`, { token: ADMIN_TOKEN });
    assert.equal(page.status, 200, page.text);
    assert.ok(page.body.organizations.length <= 2);
    paged.push(...page.body.organizations.map((org) => org.id));
    cursor = page.body.next_cursor;
  } while (cursor !== null);
  assert.deepEqual(paged, ids, 'each org once, across pages');

  assert.equal((await call(rt.url, 'GET', '/organizations', { token: orgKey })).status, 403);
  assert.equal((await call(rt.url, 'GET', '/organizations')).status, 401);
  assert.equal((await call(rt.url, 'GET', '/organizations?cursor=nope', { token: ADMIN_TOKEN })).status, 400);
  assert.equal((await call(rt.url, 'GET', '/organizations?plan=pro', { token: ADMIN_TOKEN })).status, 400, 'an unknown filter is refused, not ignored');
});
