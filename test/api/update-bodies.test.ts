// Writes of names and updates say what they store (found by an input-fuzzing probe): an
// organization's name is trimmed and its length counted after, as a workflow's is (it was stored as
// sent, and refused past 200 characters counting the spaces), and an empty PATCH of a source, a
// schedule or a device is refused, as an organization's is (it was written, moving the ETag, so
// another client's If-Match failed though nothing had changed).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createOrg, newStandardSecret } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

test('organization names are trimmed on create and update, their length counted once trimmed', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const made = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'acct-trim', name: '  Acme  ' } });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.organization.name, 'Acme');
    const long = `  ${'a'.repeat(200)}  `;
    const renamed = await call(rt.url, 'PATCH', '/organizations/acct-trim', { token: ADMIN_TOKEN, json: { name: long } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.body.organization.name, 'a'.repeat(200));
    for (const [name, stored] of [['\ufeffBeta', 'Beta'], ['\u3000Gamma\u3000', 'Gamma']]) {
      const answer = await call(rt.url, 'PATCH', '/organizations/acct-trim', { token: ADMIN_TOKEN, json: { name } });
      assert.equal(answer.body.organization.name, stored, answer.text);
    }
    const read = await call(rt.url, 'GET', '/organizations/acct-trim', { token: ADMIN_TOKEN });
    assert.equal(read.body.organization.name, 'Gamma');
    const tooLong = await call(rt.url, 'PATCH', '/organizations/acct-trim', { token: ADMIN_TOKEN, json: { name: 'a'.repeat(201) } });
    assert.deepEqual([tooLong.status, tooLong.body.error.field, tooLong.body.error.message], [400, 'name', 'Field "name" must be at most 200 characters.']);

    // A name stored untrimmed (before this rule), or before a rule it breaks, is kept when sent back as read.
    for (const stored of [' Old name ', 'old\u0085name ']) {
      await rt.runtime.context.orgs.update('acct-trim', (org) => ({ ...org, name: stored }));
      const sentBack = await call(rt.url, 'PATCH', '/organizations/acct-trim', { token: ADMIN_TOKEN, json: { name: stored, max_concurrent_runs: 7 } });
      assert.deepEqual([sentBack.status, sentBack.body.organization?.name], [200, stored], sentBack.text);
    }
  } finally {
    await rt.close();
  }
});

test('an empty PATCH of a source, a schedule or a device is refused and leaves its ETag', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-empty-patch');
    const base = '/organizations/acct-empty-patch';
    const records: Array<[string, unknown]> = [
      ['sources/shop', { name: 'shop', secrets: [newStandardSecret()] }],
      ['schedules/daily', { name: 'daily', cron: '0 9 * * *', event_type: 'daily.tick' }],
      ['devices/meter', { name: 'meter' }],
    ];
    for (const [path, json] of records) {
      const made = await call(rt.url, 'POST', `${base}/${path.split('/')[0]}`, { token: key, json });
      assert.equal(made.status, 201, made.text);
      const tag = made.headers.get('etag');
      const empty = await call(rt.url, 'PATCH', `${base}/${path}`, { token: key, json: {} });
      assert.deepEqual([empty.status, empty.body.error.code], [400, 'invalid_request'], `${path}: ${empty.text}`);
      assert.match(empty.body.error.message, /must name at least one field/);
      const read = await call(rt.url, 'GET', `${base}/${path}`, { token: key });
      assert.equal(read.headers.get('etag'), tag, `${path}: its ETag stays`);
    }
  } finally {
    await rt.close();
  }
});
