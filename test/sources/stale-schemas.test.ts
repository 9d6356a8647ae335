// Schemas stored before a rule that now refuses them: the runtime names each one at boot (a
// warning per source or device and event type, read one record per event-loop turn as requests go
// on, then a line saying the check is done), and ingest answers their events 422 until updated.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { createLogger } from '../../runtime/log.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

const dataDir = tempDir('sluice-stale-schemas-');
after(() => rmSync(dataDir, { recursive: true, force: true }));

const bounded = { type: 'object', properties: { tags: { type: 'array', uniqueItems: true, items: { type: 'object' }, maxItems: 10 } } };

test('a stored schema that a later rule refuses is named at boot, and its events get 422 invalid_event_schema', { skip: process.env['SLUICE_TEST_LEDGER'] === 'memory' && 'reopens an LMDB data dir' }, async () => {
  const org = 'acct-stale';
  const secret = newStandardSecret();
  let rt = await startRuntime({ dataDir });
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  const source = await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: key, json: { name: 'shop', secrets: [secret], event_types: { 'order.placed': { type: 'object' }, 'order.tagged': bounded } } });
  assert.equal(source.status, 201, source.text);
  const device = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: key, json: { name: 'scale', event_types: { weight: bounded } } });
  assert.equal(device.status, 201, device.text);
  await rt.close();

  // What a version before the uniqueItems rule could store: no maxItems on an array of objects.
  const ledger = openLedger(dataDir);
  const devices = ledger.openDatabase('devices');
  const unbounded = { type: 'object', properties: { tags: { type: 'array', uniqueItems: true, items: { type: 'object' } } } };
  const storedSource = ledger.sources.get([org, 'shop']) as { event_types_json: string };
  const storedDevice = devices.get([org, 'scale']) as { event_types_json: string };
  await durably(ledger.root, ledger.root.transaction(() => {
    // And one before the RE2 program cap (a pattern of 11,002 instructions): not weighed at boot
    // (compiling patterns there would hold the event loop), refused where it compiles.
    const coded = { type: 'object', properties: { code: { type: 'string', pattern: '[a-z]{1000}'.repeat(11) } } };
    // And one before $refs had to point into the schema itself: to a name every object inherits.
    const inherited = { type: 'object', required: ['a'], properties: { a: { $ref: '#/definitions/valueOf' } }, definitions: {} };
    const sourceSchemas = JSON.parse(storedSource.event_types_json) as Record<string, object>;
    ledger.sources.put([org, 'shop'], { ...storedSource, event_types_json: JSON.stringify({ ...sourceSchemas, 'order.tagged': unbounded, 'order.coded': coded, 'order.inherited': inherited }) });
    devices.put([org, 'scale'], { ...storedDevice, event_types_json: JSON.stringify({ weight: unbounded }) });
  }));
  await ledger.close();

  const lines: string[] = [];
  rt = await startRuntime({ dataDir, logger: createLogger('info', (line) => lines.push(line)) });
  try {
    // Checked as requests go on, one record per event-loop turn; it says when it is done.
    const done = await eventually('the stored schemas checked', () => lines.find((line) => line.includes('"stored event schemas checked"')), Boolean);
    assert.equal(JSON.parse(done!).refused, 3);
    const warned = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => String(entry['message']).startsWith('stored event schema refused at ingest'));
    assert.deepEqual(
      warned.map((entry) => [entry['org_id'], entry['source'], entry['event_type']]).sort(),
      [[org, '@device:scale', 'weight'], [org, 'shop', 'order.inherited'], [org, 'shop', 'order.tagged']],
      'one warning per stale schema, none for the others',
    );
    const problemOf = (type: string): string => String(warned.find((entry) => entry['event_type'] === type)?.['problem']);
    assert.match(problemOf('order.tagged'), /"uniqueItems" at "\/properties\/tags" needs "maxItems"/);

    const send = (type: string, id: string) => {
      const body = JSON.stringify({ type, tags: [] });
      return call(rt.url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(secret, id, Math.floor(Date.now() / 1000), body) });
    };
    const stale = await send('order.tagged', 'msg_stale');
    assert.deepEqual([stale.status, stale.body?.error?.code], [422, 'invalid_event_schema'], stale.text);
    const coded = await send('order.coded', 'msg_coded');
    assert.deepEqual([coded.status, coded.body?.error?.code], [422, 'invalid_event_schema'], coded.text);
    assert.match(coded.body.error.message, /compiles to 11002 RE2 instructions, more than 10,000/);
    const inheritedRef = await send('order.inherited', 'msg_inherited');
    assert.deepEqual([inheritedRef.status, inheritedRef.body?.error?.code], [422, 'invalid_event_schema'], inheritedRef.text);
    assert.match(inheritedRef.body.error.message, /"\$ref": "#\/definitions\/valueOf" at "\/properties\/a" points to no schema in this one/);
    assert.equal((await send('order.placed', 'msg_fine')).status, 204, 'the source\'s other types still ingest');
  } finally {
    await rt.close();
  }
});
