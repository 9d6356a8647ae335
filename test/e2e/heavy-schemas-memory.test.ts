// A device or source may declare ~1 MB of schemas (several MB once decoded), and an org may hold
// 1,000 devices and 200 sources. What reads all of an org's records (a start ending the device
// connections left open, a sandbox reset ending its devices' connections and forgetting their
// delivery ids) must decode them one at a time. Here 48 sandbox devices, all left connected, and 48
// sandbox sources, each with ~1 MB of schemas, on a runtime whose heap (192 MB) holds far fewer of
// them decoded at once: it starts, and its sandbox reset succeeds.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rmSync } from 'node:fs';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { call, createOrg, newStandardSecret } from '../helpers/http.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir } from '../helpers/runtime.ts';
import { heavySchemas } from '../helpers/heavy-schemas.ts';

const ORG = 'acct-heavy-sandbox';
const COPIES = 48;

test(`a runtime with ${COPIES} connected sandbox devices and ${COPIES} sandbox sources of ~1 MB schemas each starts and resets its sandbox within a 192 MB heap`, async () => {
  const dataDir = tempDir();
  try {
    // One device and one source made through the API (every write-time check passed), then copied
    // in the ledger as more API creates would store them, each device left connected as a crash leaves it.
    const first = await startRuntime({ dataDir });
    let key: string;
    try {
      key = await createOrg(first.url, ADMIN_TOKEN, ORG, 'pro');
      const eventTypes = heavySchemas(7_400, (i) => ({ x: i % 10 }));
      // Each ~1 MB body takes the org's share of the event loop for large bodies: on a loaded machine
      // the second can be refused (429 large_bodies_too_fast) and is sent again when it says, as a client would.
      const create = async (path: string, json: unknown): Promise<void> => {
        let answer = await call(first.url, 'POST', `/organizations/${ORG}/${path}`, { token: key, json });
        for (let tries = 1; answer.status === 429 && answer.body.error?.code === 'large_bodies_too_fast' && tries < 3; tries++) {
          await new Promise((resolve) => setTimeout(resolve, Number(answer.headers.get('retry-after')) * 1000));
          answer = await call(first.url, 'POST', `/organizations/${ORG}/${path}`, { token: key, json });
        }
        assert.equal(answer.status, 201, answer.text);
      };
      await create('devices', { name: 'gate-0', environment: 'sandbox', event_types: eventTypes });
      await create('sources', { name: 'src-0', environment: 'sandbox', secrets: [newStandardSecret()], event_types: eventTypes });
    } finally {
      await first.close();
    }
    const ledger = openLedger(dataDir);
    const devices = ledger.openDatabase('devices');
    const device = devices.get([ORG, 'gate-0']) as Record<string, unknown>;
    const source = ledger.sources.get([ORG, 'src-0']) as Record<string, unknown>;
    for (let index = 0; index < COPIES; index++) {
      await durably(ledger.root, ledger.root.transaction(() => {
        devices.put([ORG, `gate-${index}`], { ...device, id: `dev_${index}`, name: `gate-${index}`, connection: { id: `con_${index}`, connected_at_ms: Date.now() - 1000 } });
        if (index > 0) ledger.sources.put([ORG, `src-${index}`], { ...source, name: `src-${index}` });
      }));
    }
    await ledger.close();

    const runtime = await spawnRuntime(dataDir, 'serve', ['--runner', 'off'], 'fixed', ['--max-old-space-size=192']);
    try {
      const ended = await call(runtime.url, 'GET', `/organizations/${ORG}/devices/gate-7?environment=sandbox`, { token: key });
      assert.equal(ended.status, 200, ended.text);
      assert.deepEqual([ended.body.device.state, ended.body.device.last_disconnect_reason], ['disconnected', 'runtime_restarted'], 'the start ended the connection left open');
      const reset = await call(runtime.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
      assert.equal(reset.status, 200, reset.text);
    } finally {
      runtime.child.kill('SIGTERM');
      assert.equal(await runtime.exited, 0, runtime.output.join('\n').slice(-2000));
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
