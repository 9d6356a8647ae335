// Reactors (what an event causes, such as its runs) learn the fate of the storing transaction:
// committed once durable, abandoned when a racing duplicate loses, so in-memory effects are undone.
// A reactor that throws while preparing leaves nothing written, and the others are abandoned.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ConflictError } from '../../runtime/errors.ts';
import { generateEventId, type StoredEvent } from '../../runtime/events/event-record.ts';
import { EventStore } from '../../runtime/events/event-store.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import type { LedgerTable } from '../../runtime/ledger/ledger.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const AT = Date.UTC(2026, 10, 30, 12);

const delivery = (): StoredEvent => {
  const id = generateEventId(AT);
  return {
    id, org_id: 'org_a', type: 'order.paid', payload: { n: 1 }, environment: 'production', source: 'shop', provider_event_id: 'msg_same',
    received_at: new Date(AT).toISOString(), received_at_ms: AT, correlation_id: id, causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null,
  };
};

for (const kind of LEDGER_KINDS) describe(`event reactions (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  let store: EventStore;
  const fates: string[] = [];
  /** Event ids the second reactor refuses, as a corrupt workflow would make run creation throw. */
  const refuse = new Set<string>();
  let runs: LedgerTable;
  before(() => {
    opened = kind.open();
    const { ledger } = opened;
    store = new EventStore(ledger, new Inbox(ledger, 60_000));
    runs = ledger.openDatabase('reaction-runs');
    store.addReactor((event) => ({
      write: () => runs.put([event.org_id, `run_${event.id}`], { event: event.id }),
      committed: () => fates.push(`committed ${event.id}`),
      abandoned: () => fates.push(`abandoned ${event.id}`),
      unflushed: () => fates.push(`unflushed ${event.id}`),
    }));
    store.addReactor((event) => {
      if (refuse.has(event.id)) throw new Error('corrupt workflow');
      return undefined;
    });
  });
  after(() => opened.close());

  test('two racing deliveries of one webhook: one reaction commits, the other is abandoned', async () => {
    const first = delivery();
    const second = delivery();
    const claim = { source: 'shop', providerEventId: 'msg_same' };
    // Both pass the duplicate check before either commits; the conditional write decides.
    const outcomes = await Promise.allSettled([store.store({ event: first, recording: null, claim }), store.store({ event: second, recording: null, claim })]);
    assert.equal(outcomes[0]?.status, 'fulfilled');
    assert.equal(outcomes[1]?.status, 'rejected');
    assert.ok(outcomes[1]?.status === 'rejected' && outcomes[1].reason instanceof ConflictError);
    assert.deepEqual(fates.sort(), [`abandoned ${second.id}`, `committed ${first.id}`].sort());
    assert.equal(store.has('org_a', second.id), false);
  });

  test('a reactor that throws while preparing leaves no claim, event or run, and a retry of the delivery is stored', async () => {
    fates.length = 0;
    const claim = { source: 'shop', providerEventId: 'msg_refused' };
    const refused = { ...delivery(), provider_event_id: 'msg_refused' };
    refuse.add(refused.id);
    await assert.rejects(store.store({ event: refused, recording: null, claim }), /corrupt workflow/);
    await opened.ledger.root.flushed;
    assert.deepEqual(fates, [`abandoned ${refused.id}`], 'the first reactor undoes what it prepared');
    assert.equal(store.has('org_a', refused.id), false);
    assert.equal(runs.get(['org_a', `run_${refused.id}`]), undefined);

    const retry = { ...delivery(), provider_event_id: 'msg_refused' };
    await store.store({ event: retry, recording: null, claim });
    assert.deepEqual(fates, [`abandoned ${refused.id}`, `committed ${retry.id}`]);
    assert.deepEqual(runs.get(['org_a', `run_${retry.id}`]), { event: retry.id });
  });
});
