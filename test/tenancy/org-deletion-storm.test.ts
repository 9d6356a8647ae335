// A deletion in the middle of a storm of the org's own traffic: signed webhooks, API events (keyed
// and not), workflow and source writes, device messages and a sandbox reset are all in flight when
// the DELETE comes. However they interleave, each is answered (never a 5xx, never a hang), every
// request after the DELETE's answer is refused, and once the removal is done not one byte of the
// org is left in the ledger; another org's traffic all through it is stored whole. (One 5xx is
// expected: a write that came while the deletion's mark was written stored nothing and is answered
// `503 organization_deletion_pending`, to be sent again.)

import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg, newStandardSecret, signStandard, type CallResult } from '../helpers/http.ts';
import { scanFor } from '../helpers/ledger-scan.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const DOOMED = 'doomed-s5';
const KEEPER = 'keeper-s5';
const SECRET = newStandardSecret();

test('requests of every kind in flight when an org is deleted are answered, and leave nothing of it behind', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const keys = new Map<string, string>();
    const tokens = new Map<string, string>();
    for (const org of [DOOMED, KEEPER]) {
      const key = await createOrg(rt.url, ADMIN_TOKEN, org, 'enterprise');
      keys.set(org, key);
      const path = `/organizations/${org}`;
      assert.equal((await call(rt.url, 'POST', `${path}/sources`, { token: key, json: { name: 'shop', secrets: [SECRET] } })).status, 201);
      assert.equal((await call(rt.url, 'POST', `${path}/workflows`, { token: key, json: { name: 'w', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 1 }] } })).status, 201);
      assert.equal((await call(rt.url, 'POST', `${path}/workflows`, { token: key, json: { name: 'sb', environment: 'sandbox', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 1 }] } })).status, 201);
      const device = await call(rt.url, 'POST', `${path}/devices`, { token: key, json: { name: 'meter' } });
      assert.equal(device.status, 201, device.text);
      tokens.set(org, device.body.token as string);
    }
    const meters = new Map(await Promise.all([DOOMED, KEEPER].map(async (org) => [org, await connectDevice(rt.url, org, 'meter', tokens.get(org))] as const)));

    /** One request of each kind for `org`, numbered `n`; resolves with the statuses answered (`pending`: the 503 of a write made while the mark was written). */
    const traffic = (org: string, n: number): Array<Promise<number | 'pending'>> => {
      const key = keys.get(org)!;
      const path = `/organizations/${org}`;
      const body = JSON.stringify({ type: 'go', n });
      const status = (answer: Promise<CallResult>): Promise<number | 'pending'> =>
        answer.then((a) => (a.status === 503 && a.body?.error?.code === 'organization_deletion_pending' ? 'pending' : a.status));
      const meter = meters.get(org)!;
      if (meter.socket.readyState === meter.socket.OPEN) meter.send({ id: `m-${n}`, type: 'reading', payload: { n } });
      return [
        status(call(rt.url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(SECRET, `msg-${n}`, Math.floor(Date.now() / 1000), body) })),
        status(call(rt.url, 'POST', `${path}/events`, { token: key, json: { type: 'go', payload: { n }, id: `api-${n}` } })),
        status(call(rt.url, 'POST', `${path}/events`, { token: key, json: { type: 'go', payload: { n }, environment: 'sandbox' }, headers: { 'idempotency-key': `idem-${n}` } })),
        status(call(rt.url, 'POST', `${path}/workflows`, { token: key, json: { name: `w-${n}`, trigger_event: `other-${n}`, steps: [{ type: 'delay', duration_ms: 1 }] } })),
        status(call(rt.url, 'PATCH', `${path}/sources/shop`, { token: key, json: { body_limit_bytes: 100_000 + n } })),
        status(call(rt.url, 'POST', `${path}/api-keys`, { token: key, json: { role: 'viewer' } })),
        ...(n % 10 === 0 ? [status(call(rt.url, 'POST', `${path}/sandbox/reset`, { token: key }))] : []),
      ];
    };

    const storm: Array<Promise<number | 'pending'>> = [];
    for (let n = 0; n < 40; n++) storm.push(...traffic(DOOMED, n), ...traffic(KEEPER, n));
    const deleted = await call(rt.url, 'DELETE', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN });
    assert.equal(deleted.status, 202, deleted.text);
    // After the answer, nothing of the org is taken.
    const late = await Promise.all(traffic(DOOMED, 1_000));
    for (const status of late) assert.ok(status === 401 || status === 404, `a request after the DELETE was answered ${status}`);
    const statuses = await Promise.all(storm);
    for (const status of statuses) assert.ok(status === 'pending' || status < 500, `a request in the storm was answered ${status}`);

    await rt.runtime.deletions.idle();
    assert.equal(rt.runtime.deletions.get(DOOMED)?.state, 'removed');
    assert.deepEqual(await rt.runtime.deletions.recordsLeft(DOOMED), {});
    assert.ok((await rt.runtime.deletions.recordsLeft(KEEPER))['events']! >= 80);
    const keeper = keys.get(KEEPER)!;
    const events = await eventually('the other org\'s API events stored', async () => (await call(rt.url, 'GET', `/organizations/${KEEPER}/events?limit=500&source=@api`, { token: keeper })).body.events as unknown[], (e) => e.length >= 40);
    assert.ok(events.length >= 40);
    meters.get(KEEPER)!.close();
  } finally {
    await rt.runtime.close();
  }
  try {
    // On LMDB, byte for byte too (the memory ledger keeps nothing once closed).
    if (existsSync(join(rt.dataDir, 'runtime'))) {
      const left = scanFor(join(rt.dataDir, 'runtime'), DOOMED, KEEPER, ['deleted-orgs']);
      assert.deepEqual(left.found, []);
      assert.ok(left.othersRecords > 200, `the other org's records are there: ${left.othersRecords}`);
    }
  } finally {
    rmSync(rt.dataDir, { recursive: true, force: true });
  }
});
