// Webhook steps resolve receivers off libuv's thread pool (receiver-lookup.ts), on the real
// runtime: one org's steps to names whose nameserver never answers do not hold another org's step
// to a healthy receiver, and a name that leads to the runtime's own port is refused where the
// connection resolves it (no lookup of its own outside the step's deadline).

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

let rt: TestRuntime;
let dns: TestDnsServer;
let receiver: Receiver;
let hostsDir: string;
const keys = new Map<string, string>();

before(async () => {
  dns = await startDnsServer({ 'receiver-b.test': '127.0.0.1', 'self.test': '127.0.0.1', 'hang.evil.test': 'silent', 'hang3.evil.test': 'silent', 'broken.test': 'servfail' });
  hostsDir = mkdtempSync(join(tmpdir(), 'sluice-hosts-'));
  writeFileSync(join(hostsDir, 'hosts'), '127.0.0.1 localhost\n');
  rt = await startRuntime({ receiverResolver: new ReceiverResolver({ hostsPath: join(hostsDir, 'hosts'), servers: [dns.address] }) });
  receiver = await startReceiver();
  for (const org of ['acct-dns-a', 'acct-dns-b']) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
});
after(async () => {
  await rt.close();
  await receiver.close();
  await dns.close();
  rmSync(hostsDir, { recursive: true, force: true });
});

const api = (org: string, method: string, path: string, json?: unknown) => call(rt.url, method, `/organizations/${org}${path}`, { token: keys.get(org)!, ...(json === undefined ? {} : { json }) });

async function runOf(org: string, trigger: string, url: string, eventId: string): Promise<string> {
  const created = await api(org, 'POST', '/workflows', { name: trigger, trigger_event: trigger, steps: [{ id: 'send', type: 'webhook', url, timeout_ms: 30_000, retry: { max_retries: 0 } }] });
  assert.equal(created.status, 201, created.text);
  assert.equal((await api(org, 'POST', '/events', { type: trigger, id: eventId, payload: {} })).status, 202);
  const reactions = await eventually(`the run of ${eventId}`, async () => (await api(org, 'GET', `/events/${eventId}`)).body.reactions as Array<{ run_id: string }>, (list) => list.length === 1);
  return reactions[0]!.run_id;
}

const runState = async (org: string, runId: string) => (await api(org, 'GET', `/runs/${runId}`)).body.run;

test("one org's lookups that no nameserver answers do not hold another org's step to a healthy receiver", async () => {
  const port = new URL(receiver.url).port;
  // Four of org A's runs wait on a nameserver that never answers: as getaddrinfo calls, two held libuv's lookups.
  const hanging = await Promise.all([1, 2, 3, 4].map((i) => runOf('acct-dns-a', `hang.${i}`, `http://hang.evil.test:${port}/a${i}`, `evt-hang-${i}`)));
  await eventually('org A\'s lookups to be asked', () => dns.queries.get('hang.evil.test') ?? 0, (asked) => asked >= 4);
  const healthy = await runOf('acct-dns-b', 'healthy', `http://receiver-b.test:${port}/b`, 'evt-healthy');
  const done = await eventually('org B\'s run', () => runState('acct-dns-b', healthy), (run) => run.state !== 'running' && run.state !== 'queued');
  assert.equal(done.state, 'completed', JSON.stringify(done.error));
  assert.deepEqual(receiver.received.map((request) => request.path), ['/b']);
  for (const runId of hanging) assert.equal((await runState('acct-dns-a', runId)).state, 'running', 'org A\'s lookups still wait');
});

test('a name that resolves to this machine on the runtime\'s own port is refused for good, by the lookup the connection makes', async () => {
  const runId = await runOf('acct-dns-b', 'self', `http://self.test:${new URL(rt.url).port}/healthz`, 'evt-self');
  const run = await eventually('the self-addressed run', () => runState('acct-dns-b', runId), (state) => state.state === 'failed');
  assert.equal(run.error.code, 'self_request_refused');
  assert.equal(run.steps[0].attempts.length, 1, 'not retried');
  assert.equal(dns.queries.get('self.test'), 2, 'resolved once, for the connection (its A and AAAA queries)');
});

test('a name whose nameservers never answer fails as webhook_dns_timeout when the resolver gives up before the step\'s deadline; a failure answer is a network error that names it', async () => {
  // The resolver's tries end long before the step's 30 s (100 ms, then 200 ms).
  const quick = await startRuntime({ receiverResolver: new ReceiverResolver({ hostsPath: join(hostsDir, 'hosts'), servers: [dns.address], queryTimeoutMs: 100 }) });
  try {
    const orgKey = await createOrg(quick.url, ADMIN_TOKEN, 'acct-dns-quick');
    const quickApi = (method: string, path: string, json?: unknown) => call(quick.url, method, `/organizations/acct-dns-quick${path}`, { token: orgKey, ...(json === undefined ? {} : { json }) });
    const failedRun = async (host: string): Promise<{ code: string; message: string }> => {
      const trigger = `lookup.${host.split('.')[0]}`;
      assert.equal((await quickApi('POST', '/workflows', { name: trigger, trigger_event: trigger, steps: [{ id: 'send', type: 'webhook', url: `http://${host}/hook`, timeout_ms: 30_000, retry: { max_retries: 0 } }] })).status, 201);
      assert.equal((await quickApi('POST', '/events', { type: trigger, id: `evt-${trigger}`, payload: {} })).status, 202);
      const [reaction] = await eventually('the run', async () => (await quickApi('GET', `/events/evt-${trigger}`)).body.reactions as Array<{ run_id: string }>, (list) => list.length === 1);
      const run = await eventually('the run to fail', async () => (await quickApi('GET', `/runs/${reaction!.run_id}`)).body.run, (state) => state.state === 'failed');
      assert.equal(run.steps[0].attempts[0].started_at, null, 'nothing was sent');
      return run.error;
    };
    const silent = await failedRun('hang3.evil.test');
    assert.equal(silent.code, 'webhook_dns_timeout', silent.message);
    assert.ok(silent.message.endsWith("The receiver's name (hang3.evil.test) did not resolve: its nameservers did not answer, and the resolver stopped waiting before the step's 30000 ms had passed. Nothing was sent; the receiver was not reached."), silent.message);
    const failing = await failedRun('broken.test');
    assert.equal(failing.code, 'webhook_network_error', failing.message);
    assert.match(failing.message, /broken\.test could not be resolved now \(DNS: ESERVFAIL\)/);
  } finally {
    await quick.close();
  }
});
