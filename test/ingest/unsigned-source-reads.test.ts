// Anyone may post to a hook URL. Up to the signature check, ingest reads only the source's head
// (scheme, secrets, body cap, environment), cached apart from whole records: a wrongly signed
// delivery never decodes the source's schemas, up to ~1 MiB each, even when an org's sources hold
// more than the whole-record cache keeps (8 MiB stored), so every whole read would decode again.
// A signed delivery still reads the schemas and is checked against them.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LedgerKey } from '../../runtime/ledger/ledger.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { heavySchemas } from '../helpers/heavy-schemas.ts';

const ORG = 'acct-heavy-sources';
const SOURCES = 16;
const SECRET = newStandardSecret();
let rt: TestRuntime;
/** Whole source records decoded from the ledger, per source name. */
const decoded = new Map<string, number>();

before(async () => {
  rt = await startRuntime();
  const key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  const eventTypes = heavySchemas(3_700, () => ({ x: 'abcdefgh' }), true);
  assert.ok(JSON.stringify(eventTypes).length > 900_000);
  for (let index = 0; index < SOURCES; index++) {
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: `src-${index}`, secrets: [SECRET], event_types: eventTypes } });
    assert.equal(created.status, 201, created.text);
  }
  const table = rt.runtime.context.ledger.sources;
  const get = table.get.bind(table);
  table.get = (key: LedgerKey) => {
    const [orgId, name] = key as [string, string];
    if (orgId === ORG) decoded.set(name, (decoded.get(name) ?? 0) + 1);
    return get(key);
  };
});
after(() => rt.close());

let deliveries = 0;
const deliver = (source: string, secret: string, body: string) =>
  call(rt.url, 'POST', `/hooks/${ORG}/${source}`, { body, headers: signStandard(secret, `msg_${++deliveries}`, Math.floor(Date.now() / 1000), body) });
const totalDecoded = (): number => [...decoded.values()].reduce((sum, n) => sum + n, 0);

test('wrongly signed deliveries to every source of an org with more schemas than the cache holds decode no schemas once heads are cached', async () => {
  const wrongSecret = newStandardSecret();
  const body = '{"type":"type.1","id":"x"}';
  for (let round = 0; round < 2; round++) {
    if (round === 1) decoded.clear();
    for (let index = 0; index < SOURCES; index++) {
      const refused = await deliver(`src-${index}`, wrongSecret, body);
      assert.equal(refused.status, 401, refused.text);
    }
  }
  assert.equal(totalDecoded(), 0, `whole records decoded in the second round: ${JSON.stringify([...decoded])}`);

  // Signed deliveries read the whole source: the schema of type.0 is checked.
  const refused = await deliver('src-3', SECRET, '{"type":"type.0","id":"ord_1"}');
  assert.deepEqual([refused.status, refused.body.error.code], [422, 'schema_validation_failed'], refused.text);
  const stored = await deliver('src-3', SECRET, '{"type":"type.0","id":"ord_2","amount":5}');
  assert.equal(stored.status, 204, stored.text);
});

test('a rotated secret is seen by the next delivery: the head cache forgets a source once its write is durable', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, `${ORG}-2`, 'pro');
  const path = `/organizations/${ORG}-2/sources`;
  assert.equal((await call(rt.url, 'POST', path, { token: key, json: { name: 'billing', secrets: [SECRET] } })).status, 201);
  const post = (secret: string) => {
    const body = `{"type":"order.paid","id":"ord_${++deliveries}"}`;
    return call(rt.url, 'POST', `/hooks/${ORG}-2/billing`, { body, headers: signStandard(secret, `msg_${deliveries}`, Math.floor(Date.now() / 1000), body) });
  };
  assert.equal((await post(SECRET)).status, 204, 'the head is cached now');
  const next = newStandardSecret();
  const rotated = await call(rt.url, 'PATCH', `${path}/billing`, { token: key, json: { secrets: [next] } });
  assert.equal(rotated.status, 200, rotated.text);
  assert.equal((await post(SECRET)).status, 401, 'the removed secret signs nothing');
  assert.equal((await post(next)).status, 204);
});
