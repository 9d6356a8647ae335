// A sandbox reset takes a chain's derived-event count with the chain, also when retention pruned the
// chain's root before (its count stays while a descendant is stored): the root's id, sent again
// after the reset (sandbox fixtures are), starts a chain with a budget of its own, not the old one.
// Finding such chains reads the derived events' records only, not every sandbox event's payload.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { rootEvent, type StoredEvent } from '../../runtime/events/event-record.ts';
import { derivedEventId } from '../../runtime/runs/step-effects.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-reset-counts';

test('a reset forgets the count of a chain whose root retention pruned first; the id sent again starts from 0', async () => {
  const clock = new ManualClock(Date.UTC(2026, 9, 1, 12));
  const rt = await startRuntime({ clock });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const { ledger, context } = rt.runtime;
    const send = (environment: string) => call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'nobody.listens', payload: {}, id: 'order-1', environment } });
    assert.equal((await send('sandbox')).status, 202);
    // Twenty days on, a run of it (after a delay step, say) derives an event, as step-effects.ts writes one.
    clock.advance(20 * DAY_MS);
    const derivedId = derivedEventId('run_1', 'enrich');
    const derived = { ...rootEvent({ id: derivedId, org_id: ORG, type: 'child.made', payload: {}, environment: 'sandbox', source: '@derived', provider_event_id: null, received_at_ms: clock.now() }), correlation_id: 'order-1', causation_id: 'run_1', depth: 1 } as StoredEvent;
    await ledger.root.transaction(() => {
      context.events.countDerivedWithin(ORG, 'order-1');
      context.events.writeWithin(derived, null);
    });
    clock.advance(15 * DAY_MS);
    await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS);
    assert.deepEqual([context.events.has(ORG, 'order-1'), context.events.has(ORG, derivedId)], [false, true], 'the root went first; its descendant is still stored');
    assert.equal(context.events.derivedCount(ORG, 'order-1'), 1);
    for (const id of ['plain-1', 'plain-2']) {
      assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'nobody.listens', payload: { big: 'x'.repeat(1000) }, id, environment: 'sandbox' } })).status, 202);
    }

    // Which event records the reset reads (decoding each, payload and all).
    const read: string[] = [];
    const events = ledger.events as { get(key: unknown): unknown };
    const get = events.get;
    events.get = function (this: unknown, eventKey: unknown) {
      read.push(String((eventKey as string[])[1]));
      return get.call(this, eventKey);
    };
    try {
      assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
    } finally {
      events.get = get;
    }
    assert.deepEqual(read.filter((id) => id.startsWith('plain-')), [], 'events outside derived chains are not read');
    assert.ok(read.includes(derivedId), 'the derived event is read for its root');
    assert.deepEqual([context.events.has(ORG, 'plain-1'), context.events.has(ORG, 'plain-2')], [false, false]);
    assert.equal(context.events.has(ORG, derivedId), false);
    assert.equal(context.events.derivedCount(ORG, 'order-1'), 0, 'the chain\'s count went with it');
    assert.equal((await send('production')).status, 202);
    assert.equal(context.events.derivedCount(ORG, 'order-1'), 0, 'a new chain under the id starts from 0');
  } finally {
    await rt.close();
  }
});
