// /healthz and /metrics: liveness, and Prometheus counters that move with real ingest traffic.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';

const SECRET = `whsec_${Buffer.alloc(32, 4).toString('base64')}`;
let rt: TestRuntime;
before(async () => {
  rt = await startRuntime();
});
after(async () => rt.close());

test('/healthz answers ok without a key', async () => {
  const health = await call(rt.url, 'GET', '/healthz');
  assert.equal(health.status, 200);
  assert.equal(health.body.status, 'ok');
});

test('/metrics shows the series an operator alerts on from the start, at 0 (a series born at 1 is an increase no rate() sees)', async () => {
  const fresh = await startRuntime();
  try {
    const metrics = (await call(fresh.url, 'GET', '/metrics')).text;
    for (const job of ['inbox', 'live_updates', 'history']) assert.match(metrics, new RegExp(`^sluice_prune_failures_total\\{job="${job}"\\} 0$`, 'm'), job);
    assert.match(metrics, /^sluice_ingest_total\{outcome="write_failed"\} 0$/m);
    assert.match(metrics, /^sluice_recovering 0$/m, 'boot recovery is over once the start resolves');
    assert.match(metrics, /^sluice_process_resident_memory_bytes \d+$/m, "Node's process metrics, prefixed once");
  } finally {
    await fresh.close();
  }
});

test('/metrics counts ingest outcomes, request latency and ledger commit latency', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-metrics');
  await call(rt.url, 'POST', '/organizations/acct-metrics/sources', { token: key, json: { name: 'in', secrets: [SECRET] } });
  const body = JSON.stringify({ type: 'm.x' });
  const headers = signStandard(SECRET, 'msg_m1', Math.floor(Date.now() / 1000), body);
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-metrics/in', { body, headers })).status, 204);
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-metrics/in', { body, headers })).status, 409);
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-metrics/in', { body, headers: { ...headers, 'webhook-id': 'other' } })).status, 401);
  // Refused before the handler: an unknown source (before the body), a body over the source's cap.
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-metrics/nope', { body, headers })).status, 404);
  const big = JSON.stringify({ type: 'm.x', pad: 'x'.repeat(2 * 1024 * 1024) });
  assert.equal((await call(rt.url, 'POST', '/hooks/acct-metrics/in', { body: big, headers: signStandard(SECRET, 'msg_big', Math.floor(Date.now() / 1000), big) })).status, 413);

  // A business replay stores a new event (it counts toward the quota); its keyed retry stores none.
  const stored = (await call(rt.url, 'GET', '/organizations/acct-metrics/events', { token: key })).body.events;
  const replay = { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'replay-1' } };
  assert.equal((await call(rt.url, 'POST', `/organizations/acct-metrics/events/${stored[0].id}/replay`, replay)).status, 202);
  assert.equal((await call(rt.url, 'POST', `/organizations/acct-metrics/events/${stored[0].id}/replay`, replay)).status, 202);

  const metrics = await call(rt.url, 'GET', '/metrics');
  assert.equal(metrics.status, 200);
  assert.match(metrics.text, /sluice_ingest_total\{outcome="accepted_replay"\} 1$/m);
  assert.match(metrics.headers.get('content-type') ?? '', /text\/plain/);
  assert.match(metrics.text, /sluice_ingest_total\{outcome="accepted"\} 1/);
  assert.match(metrics.text, /sluice_ingest_total\{outcome="duplicate_event"\} 1/);
  assert.match(metrics.text, /sluice_ingest_total\{outcome="invalid_signature"\} 1/);
  assert.match(metrics.text, /sluice_ingest_total\{outcome="not_found"\} 1/);
  assert.match(metrics.text, /sluice_ingest_total\{outcome="payload_too_large"\} 1/);
  assert.match(metrics.text, /sluice_http_request_duration_seconds_count\{route="ingest",method="POST",status="204"\} 1/);
  assert.match(metrics.text, /sluice_ledger_commit_duration_seconds_count\{operation="ingest"\} 1/);
  assert.match(metrics.text, /^sluice_webhook_connections_open 0$/m);
  assert.match(metrics.text, /^sluice_webhook_requests_waiting 0$/m);
  assert.match(metrics.text, /^sluice_webhook_connections_limit [1-9]\d*$/m);
  assert.match(metrics.text, /^sluice_runs_stalled 0$/m);
  assert.doesNotMatch(metrics.text, /sluice_hook_runner_up/, 'no supervised runner here (--runner off)');
});
