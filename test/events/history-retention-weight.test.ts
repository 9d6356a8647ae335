// What a history prune reads of an event's runs: their keys and state come from the indexes
// (runs-by-event names a run's environment and creation time, runs-by-time its state), so a failed
// run kept pass after pass is never decoded; a run indexed before that is decoded, and its stored
// bytes weigh the pass. (A probe found passes that decoded every kept run's snapshot, megabytes of
// step results, counted as one unit each: 40 such runs held the event loop for 4 s, every pass.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { runKeysOf } from '../../runtime/runs/run-store.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-prune-weight';

test('a prune reads runs from their indexes; a run indexed before them is decoded and weighed by its bytes', async () => {
  const clock = new ManualClock(Date.UTC(2026, 9, 1, 12));
  const rt = await startRuntime({ clock });
  const receiver = await startReceiver([{ status: 400 }]);
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'refused', trigger_event: 'refused.x', steps: [{ type: 'webhook', url: `${receiver.url}/no` }] } });
    assert.equal(made.status, 201, made.text);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'refused.x', payload: {}, id: 'failed-1' } })).status, 202);
    await eventually('its run failed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/failed-1`, { token: key })).body.reactions, (runs: Array<{ state: string }>) => runs?.[0]?.state === 'failed');

    const { ledger, context } = rt.runtime;
    const { runs } = context;
    const decoded = runs.forEvent(ORG, 'failed-1', runKeysOf);
    assert.deepEqual(runs.keysForEvent(ORG, 'failed-1'), { runs: decoded, decodedBytes: 0 }, 'read from the indexes');
    // Indexed the way runs were before runs-by-event held their keys: decoded, its bytes counted.
    const byEvent = ledger.openDatabase('runs-by-event');
    const runId = decoded[0]!.context.runId;
    await ledger.root.transaction(() => byEvent.put([ORG, 'failed-1', runId], null));
    const stored = ledger.openDatabase('runs').getBinaryFast([ORG, runId])!.length;
    assert.deepEqual(runs.keysForEvent(ORG, 'failed-1'), { runs: decoded, decodedBytes: stored });

    // A failed run holding 320 KiB of step results, indexed the old way, then an event with no runs.
    const steps = Array.from({ length: 5 }, (_, n) => ({ id: `s${n}`, type: 'custom_action', state: 'succeeded', result: { blob: Buffer.alloc(64 * 1024, 97 + n).toString('latin1') }, attempts: [] }));
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'nobody.listens', payload: {}, id: 'heavy' } })).status, 202);
    const at = clock.now();
    const heavy = { status: 'active', value: 'failed', context: { ...decoded[0]!.context, ...{ runId: 'run_heavy', eventId: 'heavy', createdAt: at }, updatedAt: at, workflowId: 'wf_gone', workflowVersion: 1, steps, currentIndex: 5, fence: 1, retryAt: null, wakeAt: null, error: { code: 'x', message: 'x' }, cancelReason: null } };
    await ledger.root.transaction(() => {
      runs.write(heavy as never, undefined);
      byEvent.put([ORG, 'heavy', 'run_heavy'], null);
    });
    clock.advance(1);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'nobody.listens', payload: {}, id: 'lonely' } })).status, 202);
    clock.advance(31 * DAY_MS);

    // Passes of 5 units: failed-1 (its event and run) is 2, heavy 2 and 5 for its bytes, lonely 1.
    // Counted without the bytes, lonely came into the first pass.
    const stopped = new AbortController();
    stopped.abort();
    const deps = { ledger, events: context.events, runs };
    const exists = (eventId: string): boolean => ledger.events.doesExist([ORG, eventId]);
    assert.deepEqual(await pruneHistory(deps, clock.now(), 30 * DAY_MS, 5, stopped.signal), { events: 0, runs: 0 });
    assert.deepEqual([exists('failed-1'), exists('heavy'), exists('lonely')], [true, true, true], 'the pass ended after heavy');
    assert.deepEqual(await pruneHistory(deps, clock.now(), 30 * DAY_MS, 5), { events: 1, runs: 0 });
    assert.deepEqual([exists('failed-1'), exists('heavy'), exists('lonely')], [true, true, false]);
  } finally {
    await rt.close();
    await receiver.close();
  }
});
