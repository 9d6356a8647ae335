// Crash safety of runs: SIGKILL the runtime before a step starts, mid-step, after the receiver
// answered but before the result was written, during backoff and during a delay, then restart on
// the same data dir. Every run must complete, no completed step may run again, keys never change.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { ADMIN_TOKEN, spawnRuntime, tempDir, type ChildRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, type Received } from '../helpers/receiver.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const ORG = 'acct-crash-runs';

interface Delivery extends Received {
  readonly key: string;
  readonly fence: number;
}

/** A receiver whose behaviour per path can kill the runtime at the worst moments. */
async function crashReceiver(onRequest: (path: string, count: number) => 'ok' | 'fail' | 'hang' | 'ok-then-kill') {
  const deliveries: Delivery[] = [];
  const counts = new Map<string, number>();
  let kill: () => void = () => undefined;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const count = (counts.get(path) ?? 0) + 1;
      counts.set(path, count);
      deliveries.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString(), key: String(req.headers['idempotency-key']), fence: Number(req.headers['sluice-fence']) });
      const action = onRequest(path, count);
      if (action === 'hang') {
        setTimeout(() => kill(), 20);
        return;
      }
      // 'ok-then-kill': the receiver has acted on the request and answers, but the runtime is
      // killed first, so it can never read that answer (killing after the answer was flushed let
      // a fast runtime record the success now and then, and the test wrongly failed).
      if (action === 'ok-then-kill') kill();
      res.writeHead(action === 'fail' ? 503 : 200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    deliveries,
    setKill: (fn: () => void) => (kill = fn),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

async function runsOf(url: string, key: string): Promise<Array<{ run_id: string; state: string }>> {
  const answer = await call(url, 'GET', `/organizations/${ORG}/runs?limit=500`, { token: key });
  return answer.body?.runs ?? [];
}

test('SIGKILL at every kind of point: each run completes, completed steps never run again, keys are stable', async () => {
  const dataDir = tempDir();
  let runtime: ChildRuntime | undefined;
  const receiver = await crashReceiver((path, count) => {
    if (path === '/mid-step' && count === 1) return 'hang';
    if (path === '/answered' && count === 1) return 'ok-then-kill';
    if (path === '/flaky' && count === 1) return 'fail';
    return 'ok';
  });
  const killNow = (): void => {
    runtime?.child.kill('SIGKILL');
  };
  receiver.setKill(killNow);
  const restart = async (): Promise<ChildRuntime> => {
    if (runtime !== undefined) await runtime.exited;
    runtime = await spawnRuntime(dataDir);
    return runtime;
  };
  try {
    let rt = await restart();
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const workflow = async (name: string, trigger: string, steps: unknown[]) => {
      const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: trigger, steps } });
      assert.equal(created.status, 201, created.text);
    };
    const retry = { max_retries: 5, initial_ms: 400, max_ms: 400 };
    await workflow('mid-step', 'crash.mid', [{ id: 'a', type: 'webhook', url: `${receiver.url}/before-mid` }, { id: 'b', type: 'webhook', url: `${receiver.url}/mid-step`, retry }]);
    await workflow('answered', 'crash.answered', [{ id: 'a', type: 'webhook', url: `${receiver.url}/answered`, retry }, { id: 'b', type: 'webhook', url: `${receiver.url}/after-answered` }]);
    // A longer wait for the backoff scenario, so the kill lands inside it even on a loaded machine
    // (a kill while the retry is already in flight would make a third delivery, by design).
    const slowRetry = { max_retries: 5, initial_ms: 1500, max_ms: 1500 };
    await workflow('backoff', 'crash.backoff', [{ id: 'a', type: 'webhook', url: `${receiver.url}/flaky`, retry: slowRetry }]);
    await workflow('delay', 'crash.delay', [{ id: 'wait', type: 'delay', duration_ms: 1500 }, { id: 'a', type: 'webhook', url: `${receiver.url}/after-delay` }]);
    await workflow('queued', 'crash.queued', [{ id: 'a', type: 'webhook', url: `${receiver.url}/plain` }]);

    const send = (type: string, id: string) => call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, payload: {}, id } });
    // Each scenario settles before the next kill, so every count below has exactly one cause.
    const settled = (count: number) => eventually(`${count} runs completed`, () => runsOf(rt.url, key), (runs) => runs.length === count && runs.every((r) => r.state === 'completed'), 20_000);

    // 1. Mid-step: the receiver holds the request and kills the runtime while it waits.
    assert.equal((await send('crash.mid', 'e-mid')).status, 202);
    rt = await restart();
    await settled(1);
    // 2. After the receiver answered, before the result could be written.
    assert.equal((await send('crash.answered', 'e-answered')).status, 202);
    rt = await restart();
    await settled(2);
    // 3. During a backoff wait (first attempt fails with 503, retry in 1.5 s).
    assert.equal((await send('crash.backoff', 'e-backoff')).status, 202);
    await eventually('backoff', () => runsOf(rt.url, key), (runs) => runs.some((r) => r.state === 'backoff'));
    killNow();
    rt = await restart();
    await settled(3);
    // 4. During a delay.
    assert.equal((await send('crash.delay', 'e-delay')).status, 202);
    await eventually('delaying', () => runsOf(rt.url, key), (runs) => runs.some((r) => r.state === 'delaying'));
    killNow();
    rt = await restart();
    await settled(4);
    // 5. Before a step starts: a burst of events, killed as soon as the answers are in.
    const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => send('crash.queued', `e-q${i}`)));
    assert.ok(burst.every((r) => r.status === 202));
    killNow();
    rt = await restart();

    const runs = await eventually('all runs completed', () => runsOf(rt.url, key), (list) => list.length === 24 && list.every((r) => r.state === 'completed'), 20_000);
    assert.equal(runs.length, 24);

    for (const summary of runs) {
      const { body } = await call(rt.url, 'GET', `/organizations/${ORG}/runs/${summary.run_id}`, { token: key });
      for (const step of body.run.steps as Array<{ id: string; type: string; attempts: Array<{ outcome: string; fence: number }> }>) {
        const succeeded = step.attempts.filter((a) => a.outcome === 'succeeded');
        assert.equal(succeeded.length, 1, `${summary.run_id}/${step.id} succeeded exactly once`);
        const fences = step.attempts.map((a) => a.fence);
        assert.deepEqual(fences, [...fences].sort((x, y) => x - y), 'fences increase attempt after attempt');
        assert.equal(new Set(fences).size, fences.length, 'every claim has its own fence');
        if (step.type === 'delay') {
          const wait = step.attempts[step.attempts.length - 1] as unknown as { claimed_at: string; ended_at: string };
          assert.ok(Date.parse(wait.ended_at) - Date.parse(wait.claimed_at) >= 1500, 'the restart did not fire the delay early');
        }
        if (step.type !== 'webhook') continue;
        const stepKey = `${summary.run_id}:${step.id}`;
        const delivered = receiver.deliveries.filter((d) => d.key === stepKey);
        assert.ok(delivered.length >= 1, `${stepKey} was delivered`);
        assert.ok(delivered.length <= step.attempts.length, `${stepKey}: no delivery without a claimed attempt`);
        const finalFence = succeeded[0]!.fence;
        assert.ok(delivered.every((d) => d.fence <= finalFence), `${stepKey}: nothing was sent after the step completed`);
      }
    }
    const byPath = (path: string) => receiver.deliveries.filter((d) => d.path === path).length;
    const trace = receiver.deliveries.map((d) => `${d.path} ${d.key} fence=${d.fence}`).join('\n');
    assert.equal(byPath('/before-mid'), 1, `the step completed before the mid-step crash was not sent again:\n${trace}`);
    assert.equal(byPath('/mid-step'), 2, 'the interrupted step was sent again after restart, with the same key\n' + trace);
    assert.equal(byPath('/answered'), 2, 'an answer lost to the crash is retried under the same key\n' + trace);
    assert.equal(byPath('/after-answered'), 1, trace);
    assert.equal(byPath('/flaky'), 2, trace);
    const afterDelay = receiver.deliveries.find((d) => d.path === '/after-delay');
    assert.ok(afterDelay !== undefined);
    const keys = new Set(receiver.deliveries.filter((d) => d.path === '/mid-step').map((d) => d.key));
    assert.equal(keys.size, 1, 'a repeat delivery carries the same idempotency key');
  } finally {
    runtime?.child.kill('SIGKILL');
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
