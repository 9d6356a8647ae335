// Peer (b), the storage limit: a bare LMDB commit loop of the records Sluice's ingest writes per event
// (inbox claim + its time index, event + its time index, request recording), deduplicated with
// ifNoExists, 64 concurrent writers, each awaiting its flush to disk. No HTTP, no HMAC, no parsing.
// Closed loop for the peak, or open loop at a fixed rate for the storage floor of the latency curve.
//
// Child process; prints one JSON line. Usage: node --import tsx lmdb-commit-loop.ts '<LoopSpec JSON>'

import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { open } from 'lmdb';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { PLAIN_MSGPACK } from '../../runtime/ledger/open-ledger.ts';
import { summarizeLatencies, type TimedSeries } from '../harness/stats.ts';
import { buildEventPayload, EVENT_TYPE } from '../load/signed-requests.ts';

export interface LoopSpec {
  readonly dataDir: string;
  readonly warmup: number;
  readonly count: number;
  readonly writers: number;
  readonly payloadBytes: number;
  /**
   * Open loop: record i is due at start + i / rate, and its latency runs from that moment (as the
   * HTTP open-loop generator measures), so a write that waits for a free writer counts the wait.
   * Absent: closed loop, each writer starts its next write as soon as the last one is flushed.
   */
  readonly ratePerSec?: number;
}

export interface LoopResult extends TimedSeries {
  readonly completed: number;
  readonly accepted: number;
  readonly duplicates: number;
}

const ORG = 'acct-bench';
const SOURCE = 'stripe-main';

interface PreparedRecord {
  readonly providerId: string;
  readonly eventId: string;
  readonly event: Record<string, unknown>;
  readonly recording: Record<string, unknown>;
}

/**
 * Built before the clock starts: the loop measures storage only. Shapes follow what Sluice stores
 * (runtime/events/event-codec.ts): the payload as its JSON text, the recording without a body of its
 * own because the body is that text.
 */
function prepare(prefix: string, n: number, payloadBytes: number): PreparedRecord[] {
  const receivedAt = new Date().toISOString();
  return Array.from({ length: n }, (_, i) => {
    const providerId = `msg_${prefix}_${i}`;
    const eventId = `evt_${prefix}_${i}`;
    const body = buildEventPayload(providerId, payloadBytes);
    return {
      providerId,
      eventId,
      event: {
        id: eventId,
        org_id: ORG,
        type: EVENT_TYPE,
        payload_json: body,
        environment: 'production',
        source: SOURCE,
        provider_event_id: providerId,
        received_at: receivedAt,
        received_at_ms: Date.now(),
        correlation_id: eventId,
        causation_id: null,
        depth: 0,
        replay_skip_side_effects: false,
      },
      recording: {
        method: 'POST',
        path: `/hooks/${ORG}/${SOURCE}`,
        headers: { 'content-type': 'application/json', 'webhook-id': providerId, 'webhook-timestamp': '1700000000', 'webhook-signature': '[redacted]' },
        body_is_payload: true,
        body_bytes: body.length,
        body_truncated: false,
        verifier: { scheme: 'standard-webhooks', key_index: 0 },
        received_at: receivedAt,
      },
    };
  });
}

async function main(spec: LoopSpec): Promise<LoopResult> {
  // As runtime/ledger/open-ledger.ts: a write resolves at commit and carries its own batch's flush.
  const root = open({ path: spec.dataDir, maxDbs: 8, overlappingSync: true, separateFlushed: true, compression: false, ...PLAIN_MSGPACK });
  const db = (name: string) => root.openDB({ name, compression: false, ...PLAIN_MSGPACK });
  const [inbox, inboxByTime, events, eventsByTime, recordings] = ['inbox', 'inbox-by-time', 'events', 'events-by-time', 'recordings'].map(db);
  if (inbox === undefined || inboxByTime === undefined || events === undefined || eventsByTime === undefined || recordings === undefined) {
    throw new Error('could not open the named databases');
  }

  const run = async (batch: readonly PreparedRecord[], latencies: Float64Array | undefined, ratePerSec?: number) => {
    let next = 0;
    let accepted = 0;
    let duplicates = 0;
    const startedAt = performance.now();
    const dueAt = (i: number): number | undefined => (ratePerSec === undefined ? undefined : startedAt + (i * 1000) / ratePerSec);
    const writer = async (): Promise<void> => {
      for (let i = next++; i < batch.length; i = next++) {
        const record = batch[i];
        if (record === undefined) return;
        const due = dueAt(i);
        if (due !== undefined && due > performance.now()) await delay(due - performance.now());
        const started = due ?? performance.now();
        const now = Date.now();
        const claim = [ORG, SOURCE, record.providerId];
        const write = inbox.ifNoExists(claim, () => {
          inbox.put(claim, { event_id: record.eventId, claimed_at_ms: now });
          inboxByTime.put([now, ORG, SOURCE, record.providerId], null);
          events.put([ORG, record.eventId], record.event);
          eventsByTime.put([ORG, 'production', now, record.eventId], null);
          recordings.put([ORG, record.eventId], record.recording);
        });
        const stored = await durably(root, write);
        if (latencies !== undefined) latencies[i] = performance.now() - started;
        if (stored) accepted += 1;
        else duplicates += 1;
      }
    };
    await Promise.all(Array.from({ length: spec.writers }, writer));
    return { accepted, duplicates };
  };

  await run(prepare('warmup', spec.warmup, spec.payloadBytes), undefined);
  const measured = prepare('measured', spec.count, spec.payloadBytes);
  const latencies = new Float64Array(measured.length);
  const started = performance.now();
  const { accepted, duplicates } = await run(measured, latencies, spec.ratePerSec);
  const durationSec = (performance.now() - started) / 1000;
  await root.close();
  return {
    completed: measured.length,
    accepted,
    duplicates,
    durationSec,
    throughputPerSec: measured.length / durationSec,
    ...summarizeLatencies(latencies, measured.length),
  };
}

const result = await main(JSON.parse(process.argv[2] ?? '{}') as LoopSpec);
process.stdout.write(`${JSON.stringify(result)}\n`);
