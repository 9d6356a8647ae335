// The fan-out peer as the bench drives it: per round, a driver socket to `peers/ws-broadcast.ts` that
// sends per run the same three RunUpdate frames Sluice publishes (same codec, field lengths, timing).

import { createHash, randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { encodeLiveMessage, type RunUpdate } from '../../../runtime/rooms/live-codec.ts';
import type { FanoutSystem, RoomSource } from './fanout-round.ts';

/** `baseUrl`: the running peer; its `GET /stats` reports the process's own CPU. */
export function createPeerSystem(baseUrl: string, delayMs: number): FanoutSystem {
  return {
    openRoom: (orgId) => openPeerRoom(baseUrl, orgId, delayMs),
    cpuSeconds: async () => ((await (await fetch(`${baseUrl}/stats`)).json()) as { cpuSeconds: number }).cpuSeconds,
  };
}

async function openPeerRoom(baseUrl: string, orgId: string, delayMs: number): Promise<RoomSource> {
  const wsBase = baseUrl.replace('http', 'ws');
  const driver = new WebSocket(`${wsBase}/driver`, { perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => {
    driver.once('open', () => resolve());
    driver.once('error', reject);
  });
  const workflowId = randomUUID();
  let seq = 0;
  let pending = 0;
  let drained: (() => void) | undefined;
  const send = (eventId: string, state: string): void => {
    seq += 1;
    // The fields Sluice's run engine fills for a one-delay-step run (runtime/runs/run-engine.ts #updateFor).
    const update: RunUpdate = {
      run_id: `run_${createHash('sha256').update(`${orgId}\u0000${eventId}\u0000${workflowId}`).digest('hex').slice(0, 32)}`,
      state,
      channel: 'bench',
      workflow_id: workflowId,
      event_id: eventId,
      step_id: 'wait',
      attempt: state === 'queued' ? 0 : 1,
      seq,
      at_ms: Date.now(),
      error: '',
      environment: 'production',
    };
    driver.send(encodeLiveMessage({ run_update: update }));
  };
  return {
    liveUrl: `${wsBase}/organizations/${orgId}/live`,
    startRun: (index) => {
      const eventId = `evt-fanout-${String(index).padStart(6, '0')}`;
      send(eventId, 'queued');
      send(eventId, 'delaying');
      pending += 1;
      setTimeout(() => {
        send(eventId, 'completed');
        pending -= 1;
        if (pending === 0) drained?.();
      }, delayMs);
    },
    settle: async () => {
      if (pending > 0) await new Promise<void>((resolve) => (drained = resolve));
      return { published: seq, remarks: [] };
    },
    close: () => driver.close(),
  };
}
