// The fan-out subject: a running `sluice serve`; each round gets a fresh org with a one-step workflow (a
// durable delay), events posted through the public API, and one decoding subscriber that counts what was published.

import { BENCH_EVENT_TYPE, apiCall, createOrg, postEvent } from '../runs/runtime-api.ts';
import type { SluiceRuntime } from '../runs/sluice-runtime.ts';
import { watchLive } from '../runs/live-watcher.ts';
import { UPDATES_PER_RUN } from './fanout-sizes.ts';
import type { FanoutSystem, RoomSource } from './fanout-round.ts';

export function createSluiceSystem(runtime: SluiceRuntime, delayMs: number, maxConcurrentRuns: number): FanoutSystem {
  return {
    openRoom: (orgId) => openSluiceRoom(runtime, orgId, delayMs, maxConcurrentRuns),
    cpuSeconds: () => Promise.resolve(runtime.cpuSeconds()),
  };
}

async function openSluiceRoom(runtime: SluiceRuntime, orgId: string, delayMs: number, maxConcurrentRuns: number): Promise<RoomSource> {
  const apiKey = await createOrg(runtime.baseUrl, runtime.adminToken, orgId, maxConcurrentRuns);
  const created = await apiCall(runtime.baseUrl, 'POST', `/organizations/${orgId}/workflows`, apiKey, {
    name: 'bench fan-out',
    trigger_event: BENCH_EVENT_TYPE,
    channel: 'bench',
    steps: [{ id: 'wait', type: 'delay', duration_ms: delayMs }],
  });
  if (created.status !== 201) throw new Error(`POST /workflows answered ${created.status}: ${JSON.stringify(created.json).slice(0, 300)}`);
  // The bench's own subscriber decodes every frame (protobufjs): its count is what was published.
  const observer = await watchLive(runtime.baseUrl, orgId, apiKey);
  const posts: Promise<void>[] = [];
  let accepted = 0;
  let refused = 0;
  return {
    liveUrl: `${runtime.baseUrl.replace('http', 'ws')}/organizations/${orgId}/live?token=${encodeURIComponent(apiKey)}`,
    startRun: (index) => {
      const counted = (status: number): void => {
        if (status === 202) accepted += 1;
        else refused += 1;
      };
      posts.push(postEvent(runtime.baseUrl, orgId, apiKey, `evt-fanout-${String(index).padStart(6, '0')}`).then(counted, () => counted(0)));
    },
    settle: async (timeoutMs) => {
      await Promise.all(posts);
      await observer.waitForCompleted(accepted, timeoutMs);
      const published = observer.updates();
      const remarks = [`${accepted} runs accepted${refused > 0 ? `, ${refused} events refused` : ''}`];
      if (published !== accepted * UPDATES_PER_RUN) remarks.push(`${published} updates published, not ${UPDATES_PER_RUN} per run`);
      return { published, remarks };
    },
    close: () => observer.close(),
  };
}
