// An organization that has used every feature, built over the real API: keys (one revoked), a
// source with a webhook received, a scorer custom action with its secret, approved, workflows in
// both environments, a schedule, a device that sent a message, API and sandbox events, completed
// runs with projection rows and derived events, a replay, and a live socket. The org deletion and
// export tests start from it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, createOrg, signStandard } from './http.ts';
import { connectDevice } from './device-client.ts';
import { connectLive } from './live-client.ts';
import { eventually, startReceiver, type Receiver } from './receiver.ts';
import { ADMIN_TOKEN, ROOT, startRuntime, type TestRuntime } from './runtime.ts';

/** The order the scorer scores, sent as a webhook and as an API event. */
export const ORDER = { order_id: 'ord_1', amount_cents: 120000, billing: { country: 'DE' }, shipping: { country: 'US' }, items: [{ sku: 'a', quantity: 2 }], customer: { new: true } };

export interface PopulatingRuntime {
  /** A runtime with a hook-runner child (real Wasmtime). */
  readonly rt: TestRuntime;
  /** A receiver that answers every webhook step 2xx. */
  readonly receiver: Receiver;
  /** The order-risk-scorer, built from the AssemblyScript kit. */
  readonly scorer: Buffer;
  /** Stops the runtime and the receiver and removes their files. */
  close(): Promise<void>;
}

/** What populateOrg needs: the scorer built, a runtime with its hook-runner, a receiver. */
export async function startPopulatingRuntime(): Promise<PopulatingRuntime> {
  const buildDir = mkdtempSync(join(tmpdir(), 'sluice-kit-'));
  const built = spawnSync(process.execPath, [join(ROOT, 'kits/build.mjs'), '--out', buildDir, 'assemblyscript'], { encoding: 'utf8' });
  assert.equal(built.status, 0, `building the AssemblyScript kit failed:\n${built.stderr}`);
  const scorer = readFileSync(join(buildDir, 'order-risk-scorer-assemblyscript.wasm'));
  const rt = await startRuntime({ args: ['--runner', 'child'] });
  const receiver = await startReceiver();
  return {
    rt,
    receiver,
    scorer,
    close: async () => {
      await rt.close();
      await receiver.close();
      rmSync(buildDir, { recursive: true, force: true });
      rmSync(rt.dataDir, { recursive: true, force: true });
    },
  };
}

export interface PopulateOptions {
  /** Where Sluice listens. */
  readonly url: string;
  /** Where the webhook steps go (a receiver that answers 2xx). */
  readonly receiverUrl: string;
  /** The order-risk-scorer module (built from a kit). */
  readonly scorer: Buffer;
  /** The source's Standard Webhooks secret. */
  readonly secret: string;
}

async function upload(url: string, org: string, key: string, scorer: Buffer): Promise<string> {
  const form = new FormData();
  form.set('name', 'order-risk-scorer');
  form.set('permissions', 'read_secret:RISK_THRESHOLD');
  form.set('file', new Blob([scorer]), 'action.wasm');
  const response = await fetch(`${url}/organizations/${org}/custom-actions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  const body = (await response.json()) as { custom_action: { id: string } };
  assert.equal(response.status, 201, JSON.stringify(body));
  const actionId = body.custom_action.id;
  assert.equal((await call(url, 'POST', `/organizations/${org}/custom-actions/${actionId}/secrets`, { token: key, json: { key: 'RISK_THRESHOLD', value: '50' } })).status, 204);
  assert.equal((await call(url, 'POST', `/organizations/${org}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  return actionId;
}

/** Gives a new org `org` a bit of everything; answers its admin key, a viewer key, its open sockets and its action. */
export async function populateOrg(options: PopulateOptions, org: string) {
  const { url, receiverUrl, secret } = options;
  const key = await createOrg(url, ADMIN_TOKEN, org);
  const path = `/organizations/${org}`;
  const ok = async (method: string, sub: string, json: unknown, status: number, headers?: Record<string, string>) => {
    const answer = await call(url, method, `${path}${sub}`, { token: key, json, ...(headers === undefined ? {} : { headers }) });
    assert.equal(answer.status, status, `${method} ${sub}: ${answer.text}`);
    return answer.body;
  };
  const viewer = (await ok('POST', '/api-keys', { role: 'viewer' }, 201)) as { key: string; id: string };
  const revoked = (await ok('POST', '/api-keys', { role: 'viewer' }, 201)) as { id: string };
  await ok('DELETE', `/api-keys/${revoked.id}`, undefined, 200);
  await ok('POST', '/sources', { name: 'shop', secrets: [secret] }, 201);
  const actionId = await upload(url, org, key, options.scorer);
  await ok('POST', '/workflows', { name: 'score', trigger_event: 'orders.created', steps: [{ id: 'score', type: 'custom_action', action_id: actionId }] }, 201, { 'idempotency-key': `wf-${org}` });
  await ok('POST', '/workflows', { name: 'notify', trigger_event: 'orders.risk_scored', steps: [{ id: 'tell', type: 'webhook', url: `${receiverUrl}/scored` }] }, 201);
  await ok('POST', '/workflows', { name: 'sandboxed', trigger_event: 'orders.created', environment: 'sandbox', steps: [{ type: 'webhook', url: `${receiverUrl}/sandbox` }] }, 201);
  await ok('POST', '/schedules', { name: 'nightly', cron: '0 3 * * *', event_type: 'nightly.tick' }, 201);
  const device = (await ok('POST', '/devices', { name: 'meter-1' }, 201)) as { token: string };

  const body = JSON.stringify({ type: 'orders.created', ...ORDER });
  const hook = await call(url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(secret, `msg-${org}`, Math.floor(Date.now() / 1000), body) });
  assert.equal(hook.status, 204, hook.text);
  await ok('POST', '/events', { type: 'orders.created', payload: ORDER, id: `api-${org}` }, 202);
  await ok('POST', '/events', { type: 'orders.created', payload: ORDER, environment: 'sandbox' }, 202);
  const meter = await connectDevice(url, org, 'meter-1', device.token);
  meter.send({ id: 'reading-1', type: 'reading.taken', payload: { kwh: 3 } });
  assert.equal((await meter.answerTo('reading-1')).type, 'ack');
  // Both scoring runs complete, each with its projection row and derived event, whose runs complete too.
  await eventually(`${org}: runs done`, async () => (await call(url, 'GET', `${path}/runs?limit=50`, { token: key })).body.runs as Array<{ state: string }>, (runs) => runs.length === 4 && runs.every((run) => run.state === 'completed'));
  await ok('POST', `/events/api-${org}/replay`, { side_effects: 'skip' }, 202);
  const live = await connectLive(url, org, { token: viewer.key });
  live.subscribe({});
  return { key, viewer: viewer.key, live, meter, actionId, deviceToken: device.token };
}
