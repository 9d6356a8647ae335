// A sandbox reset takes a chain's derived-event count with the chain, also when retention pruned the
// chain's root before (its count stays while a descendant is stored): the root's id, sent again
// after the reset (sandbox fixtures are), starts a chain with a budget of its own, not the old one.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { rootEvent, type StoredEvent } from '../../runtime/events/event-record.ts';
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
    const derived = { ...rootEvent({ id: 'evt_derived_1', org_id: ORG, type: 'child.made', payload: {}, environment: 'sandbox', source: '@derived', provider_event_id: null, received_at_ms: clock.now() }), correlation_id: 'order-1', causation_id: 'run_1', depth: 1 } as StoredEvent;
    await ledger.root.transaction(() => {
      context.events.countDerivedWithin(ORG, 'order-1');
      context.events.writeWithin(derived, null);
    });
    clock.advance(15 * DAY_MS);
    await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS);
    assert.deepEqual([context.events.has(ORG, 'order-1'), context.events.has(ORG, 'evt_derived_1')], [false, true], 'the root went first; its descendant is still stored');
    assert.equal(context.events.derivedCount(ORG, 'order-1'), 1);

    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
    assert.equal(context.events.has(ORG, 'evt_derived_1'), false);
    assert.equal(context.events.derivedCount(ORG, 'order-1'), 0, 'the chain\'s count went with it');
    assert.equal((await send('production')).status, 202);
    assert.equal(context.events.derivedCount(ORG, 'order-1'), 0, 'a new chain under the id starts from 0');
  } finally {
    await rt.close();
  }
});
