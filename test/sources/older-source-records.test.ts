// A data dir from before data format 8 holds sources with their schemas as objects. A release that
// stores them as JSON text starts on it without an upgrade pass: such a source is listed with its
// schemas, its stale ones are named at boot, its deliveries are checked against them, and the
// update that next writes it stores it in the new form.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { createLogger } from '../../runtime/log.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

const dataDir = tempDir('sluice-older-sources-');
after(() => rmSync(dataDir, { recursive: true, force: true }));

const ORG = 'acct-older-sources';
const PAID = { type: 'object', required: ['amount'], properties: { amount: { type: 'number', minimum: 1 } } };
/** Refused since a later rule (uniqueItems needs maxItems), so named at boot. */
const UNBOUNDED = { type: 'object', properties: { tags: { type: 'array', uniqueItems: true, items: { type: 'object' } } } };

test('a source stored with its schemas as objects is read with them, checks deliveries against them, and is stored as text at its next update', async () => {
  const secret = newStandardSecret();
  let rt = await startRuntime({ dataDir });
  const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'shop', secrets: [secret], event_types: { 'order.paid': PAID } } });
  assert.equal(created.status, 201, created.text);
  await rt.close();

  // A new source is stored in the new form; put it back as a release before data format 8 stored it.
  const ledger = openLedger(dataDir);
  const stored = ledger.sources.get([ORG, 'shop']) as Record<string, unknown>;
  assert.deepEqual([typeof stored['event_types_json'], 'event_types' in stored], ['string', false]);
  assert.deepEqual(JSON.parse(stored['event_types_json'] as string), { 'order.paid': PAID });
  const { event_types_json: _text, ...head } = stored;
  const older = { 'order.paid': PAID, 'order.tagged': UNBOUNDED };
  await durably(ledger.root, ledger.root.transaction(() => ledger.sources.put([ORG, 'shop'], { ...head, event_types: older })));
  await ledger.close();

  const lines: string[] = [];
  rt = await startRuntime({ dataDir, logger: createLogger('info', (line) => lines.push(line)) });
  try {
    const done = await eventually('the stored schemas checked', () => lines.find((line) => line.includes('"stored event schemas checked"')), Boolean);
    assert.equal(JSON.parse(done!).refused, 1, 'the older record\'s schemas were read at boot');

    const listed = await call(rt.url, 'GET', `/organizations/${ORG}/sources`, { token: key });
    assert.deepEqual(listed.body.sources.map((source: { event_types: unknown }) => source.event_types), [older]);
    const read = await call(rt.url, 'GET', `/organizations/${ORG}/sources/shop`, { token: key });
    assert.deepEqual(read.body.source.event_types, older);

    let sent = 0;
    const deliver = (signingSecret: string, payload: object) => {
      const body = JSON.stringify(payload);
      return call(rt.url, 'POST', `/hooks/${ORG}/shop`, { body, headers: signStandard(signingSecret, `msg_${++sent}`, Math.floor(Date.now() / 1000), body) });
    };
    assert.equal((await deliver(newStandardSecret(), { type: 'order.paid', amount: 5 })).status, 401, 'a wrong signature is refused from the head');
    const refused = await deliver(secret, { type: 'order.paid', amount: 0 });
    assert.deepEqual([refused.status, refused.body.error?.code], [422, 'schema_validation_failed'], refused.text);
    assert.equal((await deliver(secret, { type: 'order.paid', amount: 5 })).status, 204);

    const rotated = newStandardSecret();
    const updated = await call(rt.url, 'PATCH', `/organizations/${ORG}/sources/shop`, { token: key, json: { secrets: [rotated] } });
    assert.equal(updated.status, 200, updated.text);
    assert.deepEqual(updated.body.source.event_types, older);
    const rewritten = rt.runtime.context.ledger.sources.get([ORG, 'shop']) as Record<string, unknown>;
    assert.deepEqual([JSON.parse(rewritten['event_types_json'] as string), 'event_types' in rewritten], [older, false], 'the update stored the schemas as text');

    const refusedAgain = await deliver(rotated, { type: 'order.paid' });
    assert.deepEqual([refusedAgain.status, refusedAgain.body.error?.code], [422, 'schema_validation_failed'], refusedAgain.text);
    assert.equal((await deliver(rotated, { type: 'order.paid', amount: 2 })).status, 204);
    assert.deepEqual((await call(rt.url, 'GET', `/organizations/${ORG}/sources/shop`, { token: key })).body.source.event_types, older);
  } finally {
    await rt.close();
  }
});
