// Anyone may open a device socket. Its upgrade reads only the device's head (token hash, ids,
// environment), cached apart from whole records: a wrong token never decodes the device's
// schemas, up to ~1 MiB each, even when an org's devices hold more than the whole-record cache
// keeps (8 MiB stored), so every whole read would decode again. Messages are still checked
// against the schemas as they are.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LedgerKey, LedgerTable } from '../../runtime/ledger/ledger.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';
import { upgradeAnswer } from '../helpers/upgrade-answer.ts';
import { heavySchemas } from '../helpers/heavy-schemas.ts';

const ORG = 'acct-heavy-devices';
const DEVICES = 16;
let rt: TestRuntime;
let orgKey: string;
/** Whole device records decoded from the ledger, per device name. */
const decoded = new Map<string, number>();
const tokens: string[] = [];

/** The devices table with its reads of ORG's records counted (other methods as they are). */
function countingReads(table: LedgerTable): LedgerTable {
  return new Proxy(table, {
    get(target, property) {
      if (property === 'get') {
        return (key: LedgerKey) => {
          const [orgId, name] = key as [string, string];
          if (orgId === ORG) decoded.set(name, (decoded.get(name) ?? 0) + 1);
          return target.get(key);
        };
      }
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

before(async () => {
  const dataDir = tempDir();
  const ledger = openLedger(dataDir);
  rt = await startRuntime({ dataDir, ledger: { ...ledger, openDatabase: (name) => (name === 'devices' ? countingReads(ledger.openDatabase(name)) : ledger.openDatabase(name)) } });
  orgKey = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  const eventTypes = heavySchemas(3_700, () => ({ x: 'abcdefgh' }), true);
  assert.ok(JSON.stringify(eventTypes).length > 900_000);
  for (let index = 0; index < DEVICES; index++) {
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: orgKey, json: { name: `gate-${index}`, event_types: eventTypes } });
    assert.equal(created.status, 201, created.text);
    tokens.push(created.body.token);
  }
});
after(() => rt.close());

test('wrong-token upgrades to every device of an org with more schemas than the cache holds decode no schemas once heads are cached', async () => {
  const socketUrl = (index: number) => `${rt.url}/devices/${ORG}/gate-${index}?token=sdt_wrong`;
  for (let round = 0; round < 2; round++) {
    if (round === 1) decoded.clear();
    for (let index = 0; index < DEVICES; index++) {
      const refused = await upgradeAnswer(socketUrl(index));
      assert.deepEqual([refused.status, refused.code], [401, 'unauthorized']);
    }
  }
  assert.equal([...decoded.values()].reduce((sum, n) => sum + n, 0), 0, `whole records decoded in the second round: ${JSON.stringify([...decoded])}`);

  // A device with its token connects, and its messages are checked against its schemas.
  const device = await connectDevice(rt.url, ORG, 'gate-3', tokens[3]);
  device.send({ id: 'm-1', type: 'type.0', payload: {} });
  const refused = await device.answerTo('m-1');
  assert.deepEqual([refused.type, refused.error.code], ['nack', 'schema_validation_failed']);
  device.send({ id: 'm-2', type: 'type.0', payload: { amount: 5 } });
  assert.equal((await device.answerTo('m-2')).type, 'ack');
  device.close();
  assert.equal((await device.closed).code, 1000);
});

test('a rotated token is seen by the next upgrade: the head cache forgets a device once its write is durable', async () => {
  const old = tokens[5]!;
  const first = await connectDevice(rt.url, ORG, 'gate-5', old);
  first.close();
  await first.closed;
  const rotated = await call(rt.url, 'POST', `/organizations/${ORG}/devices/gate-5/token`, { token: orgKey });
  assert.equal(rotated.status, 200, rotated.text);
  assert.equal((await upgradeAnswer(`${rt.url}/devices/${ORG}/gate-5?token=${old}`)).status, 401, 'the old token opens nothing');
  const again = await connectDevice(rt.url, ORG, 'gate-5', rotated.body.token);
  again.close();
  assert.equal((await again.closed).code, 1000);
});
