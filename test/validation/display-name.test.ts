// Names people read (an org's, a workflow's, a custom action's) hold only characters that show, and
// something besides white space: a hostile-text probe had names of zero-width spaces listed as blank,
// and C1 controls (a terminal's CSI), NEL and line separators accepted. Emoji sequences, accents and
// right-to-left scripts are names like any other.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseActionName } from '../../runtime/actions/action-fields.ts';
import { InputError } from '../../runtime/errors.ts';
import { assertDisplayName } from '../../runtime/validation/display-name.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const REFUSED = ['a\u009bb', 'a\u0085b', 'a\u2028b', 'a\u202eevil', 'a\u2066b', '\u200b', '\u200b\u200c\u2060', '\u3164', '\u{e0041}', ' \u00a0 '];
// A subdivision flag is tag characters after its black flag; direction marks shape mixed-direction names.
const KEPT = ['Payments 💳', '👩🏽‍💻 team', '🇩🇪 Berlin', '🏴\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f} England', 'order \u200fשלום\u200f 2', 'Acme\u00adCorp', 'café', 'cafe\u0301', 'مدفوعات', '支付'];

const refusal = (run: () => unknown): string | undefined => {
  try {
    run();
    return undefined;
  } catch (error) {
    assert.ok(error instanceof InputError, String(error));
    assert.equal(error.status, 400);
    return error.message;
  }
};

test('what shows is a name; controls, separators, direction overrides and invisible-only text are not', () => {
  for (const name of REFUSED) assert.ok(refusal(() => assertDisplayName(name, 'name')) !== undefined, JSON.stringify(name));
  for (const name of KEPT) assert.equal(refusal(() => assertDisplayName(name, 'name')), undefined, name);
  assert.match(refusal(() => assertDisplayName('a\u009bb', 'name')) ?? '', /must not contain control characters, line or paragraph separators, or direction overrides/);
  assert.match(refusal(() => assertDisplayName('\u200b', 'name')) ?? '', /must show something: not only white space or invisible characters/);
  assert.equal(refusal(() => assertDisplayName('\u200b', 'name', '\u200b')), undefined, 'a name stored before the rule, sent unchanged');
  assert.ok(refusal(() => parseActionName('risk\u0085scorer')) !== undefined, 'a custom action name too');
  assert.equal(parseActionName('  risk scorer 🛡️ '), 'risk scorer 🛡️');
});

let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-display-names');
});
after(() => rt.close());

test('the API refuses such names for organizations and workflows with a 400 naming the field, and keeps the others', async () => {
  const workflow = (name: string) => call(rt.url, 'POST', '/organizations/acct-display-names/workflows', { token: key, json: { name, trigger_event: 'a.b', steps: [{ type: 'webhook', url: 'https://example.com/hook' }] } });
  for (const name of ['a\u009bb', '\u200b']) {
    const org = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: 'acct-hidden-name', name } });
    assert.deepEqual([org.status, org.body.error?.field], [400, 'name'], org.text);
    const renamed = await call(rt.url, 'PATCH', '/organizations/acct-display-names', { token: ADMIN_TOKEN, json: { name } });
    assert.deepEqual([renamed.status, renamed.body.error?.field], [400, 'name'], renamed.text);
    const made = await workflow(name);
    assert.deepEqual([made.status, made.body.error?.field], [400, 'name'], made.text);
  }
  assert.equal((await call(rt.url, 'PATCH', '/organizations/acct-display-names', { token: ADMIN_TOKEN, json: { name: '🇩🇪 Lumen' } })).status, 200);
  // A name stored before the rule (written here past the API) is kept by a write that sends it unchanged.
  await rt.runtime.context.orgs.update('acct-display-names', (stored) => ({ ...stored, name: 'old\u0085name' }));
  const unchanged = await call(rt.url, 'PATCH', '/organizations/acct-display-names', { token: ADMIN_TOKEN, json: { name: 'old\u0085name', max_concurrent_runs: 5 } });
  assert.equal(unchanged.status, 200, unchanged.text);
  assert.equal((await workflow('👩🏽‍💻 notify')).status, 201);
});
