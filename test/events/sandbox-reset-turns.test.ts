// A sandbox reset reads the org's devices a few per event-loop turn: each read of a device record
// decodes its schemas (up to ~1 MB, ~30 ms), and an org may hold 1,000 devices, so reading them
// all in one transaction held every org's requests for seconds. Here 24 connected sandbox devices:
// no turn of the reset reads more than 8 device records, and every connection still ends.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LedgerKey, LedgerTable } from '../../runtime/ledger/ledger.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { CLOSE_SANDBOX_RESET } from '../../runtime/triggers/device-frame.ts';
import { connectDevice, type DeviceClient } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';
import { countTurns, type TurnCounter } from '../helpers/loop-turns.ts';

const ORG = 'acct-reset-turns';
const DEVICES = 24;

test(`a sandbox reset of an org with ${DEVICES} connected sandbox devices reads at most 8 device records per event-loop turn`, async () => {
  let turns: TurnCounter | undefined;
  const readsPerTurn = new Map<number, number>();
  const counted = (table: LedgerTable): LedgerTable =>
    new Proxy(table, {
      get(target, property) {
        if (property === 'get') {
          return (key: LedgerKey) => {
            const turn = turns?.count();
            if (turn !== undefined && resetting() && (key as readonly unknown[])[0] === ORG) readsPerTurn.set(turn, (readsPerTurn.get(turn) ?? 0) + 1);
            return target.get(key);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  const dataDir = tempDir();
  const ledger = openLedger(dataDir);
  const rt = await startRuntime({ dataDir, ledger: { ...ledger, openDatabase: (name) => (name === 'devices' ? counted(ledger.openDatabase(name)) : ledger.openDatabase(name)) } });
  // The reset's own reads: the sockets it closes end afterwards, each in its own write.
  const resetting = (): boolean => rt.runtime.context.runs.sandboxGenerations.resetting(ORG);
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
    const devices: DeviceClient[] = [];
    for (let index = 0; index < DEVICES; index++) {
      const made = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: `lab-${index}`, environment: 'sandbox' } });
      assert.equal(made.status, 201, made.text);
      devices.push(await connectDevice(rt.url, ORG, `lab-${index}`, made.body.token));
    }
    turns = countTurns();
    const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
    turns.stop();
    turns = undefined;
    assert.equal(reset.status, 200, reset.text);
    const most = Math.max(...readsPerTurn.values());
    assert.ok(readsPerTurn.size > 0 && most <= 8, `device records read per turn: ${JSON.stringify([...readsPerTurn.values()])}`);
    for (const device of devices) assert.equal((await device.closed).code, CLOSE_SANDBOX_RESET);
    const view = await call(rt.url, 'GET', `/organizations/${ORG}/devices/lab-7?environment=sandbox`, { token: key });
    assert.deepEqual([view.body.device.state, view.body.device.last_disconnect_reason], ['disconnected', 'sandbox_reset']);
  } finally {
    turns?.stop();
    await rt.close();
  }
});
