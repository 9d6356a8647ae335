// The ticker against a change racing its tick, on each ledger: a PATCH whose write is ordered
// before the tick's (another pattern, a last tick stamped a moment later) wins, and the old
// pattern's tick is not sent from the record read before it.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { EventRunsGate } from '../../runtime/events/event-runs-gate.ts';
import { EventStore } from '../../runtime/events/event-store.ts';
import { EventWriteTurns } from '../../runtime/events/event-write-turns.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { createLogger } from '../../runtime/log.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { OrganizationStore } from '../../runtime/tenancy/organizations.ts';
import type { ScheduleRecord } from '../../runtime/triggers/schedule-record.ts';
import { ScheduleStore } from '../../runtime/triggers/schedule-store.ts';
import { ARMED_PER_TURN, ScheduleTicker } from '../../runtime/triggers/schedule-ticker.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const TEN = Date.UTC(2026, 10, 30, 10, 0, 0);
const ORG = 'acct-ticker';

for (const kind of LEDGER_KINDS) describe(`schedule ticker (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  let schedules: ScheduleStore;
  let events: EventStore;
  let ticker: ScheduleTicker;
  let orgs: OrganizationStore;
  const clock = new ManualClock(TEN);
  before(async () => {
    opened = kind.open();
    const { ledger } = opened;
    orgs = new OrganizationStore(ledger);
    await orgs.create({ id: ORG, name: ORG, plan: 'pro', max_concurrent_runs: 4, created_at: new Date(TEN).toISOString(), updated_at: new Date(TEN).toISOString() }, () => undefined);
    events = new EventStore(ledger, new Inbox(ledger, 60_000));
    schedules = new ScheduleStore(ledger, events);
    ticker = new ScheduleTicker({ schedules, orgs, writeTurns: new EventWriteTurns(new EventRunsGate(), new RunStore(ledger).sandboxGenerations, () => 0), clock, logger: createLogger('silent'), onSent: () => undefined });
  });
  after(async () => {
    await ticker.close();
    await opened.close();
  });

  test('a pattern changed in a write ordered before the tick: the old tick is not sent', async () => {
    const hourly: ScheduleRecord = {
      id: 'sch_race', org_id: ORG, name: 'race', cron: '0 * * * *', timezone: 'UTC', event_type: 'race.tick', environment: 'production', payload_json: 'null',
      enabled: true, created_at: '', updated_at: '', last_tick_ms: TEN - 30 * 60_000, last_sent_tick_ms: null,
    };
    await schedules.create(hourly);
    ticker.arm(hourly);
    assert.equal(ticker.timers.dueAt(`${ORG}\u0000race`), TEN, 'the 10:00 tick is due');
    // The PATCH's write is queued first and stamps its last tick a moment after the ticker read the clock.
    const patched = schedules.update(ORG, 'race', (stored) => ({ ...stored, cron: '30 * * * *', updated_at: 'now', last_tick_ms: TEN + 5 }));
    assert.equal(ticker.timers.fireDue(), 1);
    clock.advance(5);
    const stored = await patched;
    ticker.arm(stored);
    // The tick's write was queued when fireDue() returned, after the PATCH's: a write queued now
    // commits after both (writes commit in order), so its answer means the tick's is decided.
    await opened.ledger.root.transaction(() => undefined);
    assert.deepEqual(events.list(ORG, 'production', { limit: 10 }).events, [], 'no event from the old pattern');
    assert.equal(schedules.get(ORG, 'race')?.last_tick_ms, TEN + 5, 'the last tick stays where the PATCH put it');
    assert.equal(ticker.timers.dueAt(`${ORG}\u0000race`), TEN + 30 * 60_000, 'next: 10:30 by the new pattern');
  });

  test('an org deleted while its tick is being sent: its timer is not armed again', async () => {
    const doomed = 'acct-ticker-doomed';
    await orgs.create({ id: doomed, name: doomed, plan: 'pro', max_concurrent_runs: 4, created_at: new Date(TEN).toISOString(), updated_at: new Date(TEN).toISOString() }, () => undefined);
    const minutely: ScheduleRecord = {
      id: 'sch_doomed', org_id: doomed, name: 'minutely', cron: '* * * * *', timezone: 'UTC', event_type: 'doomed.tick', environment: 'production', payload_json: 'null',
      enabled: true, created_at: '', updated_at: '', last_tick_ms: TEN - 60_000, last_sent_tick_ms: null,
    };
    await schedules.create(minutely);
    ticker.arm(minutely);
    assert.equal(ticker.dueAt(doomed, 'minutely'), clock.now(), 'the 10:00 tick is owed: due at once');
    // The tick reads the org and queues its write; the org is deleted (as org-deletion.ts marks it) before that write ends.
    assert.equal(ticker.timers.fireDue(), 1);
    const { ledger } = opened;
    await orgs.deleting(doomed, () => ledger.root.transaction(() => void ledger.orgs.remove([doomed])));
    ticker.forgetOrg(doomed);
    await ticker.idle();
    assert.equal(ticker.dueAt(doomed, 'minutely'), undefined, 'not armed for 10:01');
  });

  test('a start arms every stored schedule in turns: other work runs between them; not one of an org deleted before its removal reached it', async () => {
    for (let i = 0; i < 3; i++) await orgs.create({ id: `acct-many-${i}`, name: 'many', plan: 'pro', max_concurrent_runs: 4, created_at: new Date(TEN).toISOString(), updated_at: new Date(TEN).toISOString() }, () => undefined);
    const table = opened.ledger.openDatabase('schedules');
    const names = Array.from({ length: 150 }, (_, i) => `many-${String(i).padStart(3, '0')}`);
    await opened.ledger.root.transaction(() => {
      for (const [i, name] of names.entries()) {
        const org = `acct-many-${i % 3}`;
        void table.put([org, name], { id: `sch_${name}`, org_id: org, name, cron: '0 * * * *', timezone: 'UTC', event_type: 'many.tick', environment: 'production', payload_json: 'null', enabled: true, created_at: '', updated_at: '', last_tick_ms: TEN, last_sent_tick_ms: null });
      }
    });
    let otherWorkRan = false;
    const starting = ticker.start();
    setImmediate(() => (otherWorkRan = true));
    await starting;
    assert.equal(otherWorkRan, true);
    const unarmed = names.filter((name, i) => ticker.dueAt(`acct-many-${i % 3}`, name) !== TEN + 60 * 60_000);
    assert.deepEqual(unarmed, [], 'each armed for 11:00');
    // A stored schedule whose org record is gone (a deletion a stop cut short): left unarmed.
    await opened.ledger.root.transaction(() => void table.put(['acct-never-here', 'orphan'], { id: 'sch_orphan', org_id: 'acct-never-here', name: 'orphan', cron: '0 * * * *', timezone: 'UTC', event_type: 'many.tick', environment: 'production', payload_json: 'null', enabled: true, created_at: '', updated_at: '', last_tick_ms: TEN, last_sent_tick_ms: null }));
    await ticker.start();
    assert.equal(ticker.dueAt('acct-never-here', 'orphan'), undefined);
    assert.equal(ticker.dueAt('acct-many-0', names[0]!), TEN + 60 * 60_000, 'the others stay armed');
  });

  test('schedules ticking at one minute fire, and are armed again once their writes commit, ARMED_PER_TURN per event-loop turn', async () => {
    const org = 'acct-minutely';
    await orgs.create({ id: org, name: org, plan: 'pro', max_concurrent_runs: 4, created_at: new Date(clock.now()).toISOString(), updated_at: new Date(clock.now()).toISOString() }, () => undefined);
    const names = Array.from({ length: 3 * ARMED_PER_TURN }, (_, i) => `tick-${i}`);
    for (const name of names) {
      const record: ScheduleRecord = { id: `sch_${name}`, org_id: org, name, cron: '* * * * *', timezone: 'UTC', event_type: 'minutely.tick', environment: 'production', payload_json: 'null', enabled: true, created_at: '', updated_at: '', last_tick_ms: clock.now(), last_sent_tick_ms: null };
      await schedules.create(record);
      ticker.arm(record);
    }
    const tick = Math.ceil((clock.now() + 1) / 60_000) * 60_000;
    clock.set(tick);
    const armedFor = (at: number) => names.filter((name) => ticker.dueAt(org, name) === at).length;
    // Each turn: how many fired (no longer armed for this minute) and how many were armed for the next.
    const firedPerTurn = [ticker.timers.fireDue()];
    const armedPerTurn: number[] = [];
    let fired = firedPerTurn[0]!;
    let armed = 0;
    for (let turn = 0; turn < 1000 && armed < names.length; turn++) {
      await new Promise((resolve) => setImmediate(resolve));
      const firedNow = names.length - armedFor(tick);
      const armedNow = armedFor(tick + 60_000);
      firedPerTurn.push(firedNow - fired);
      armedPerTurn.push(armedNow - armed);
      [fired, armed] = [firedNow, armedNow];
    }
    assert.equal(armed, names.length, 'every schedule is armed for the next minute');
    assert.equal(events.list(org, 'production', { limit: 500 }).events.length, names.length, 'each sent its tick once');
    assert.ok(Math.max(...armedPerTurn) <= ARMED_PER_TURN, `at most ${ARMED_PER_TURN} armed again per turn: ${armedPerTurn.filter((n) => n > 0).join(', ')}`);
    assert.ok(Math.max(...firedPerTurn) <= ARMED_PER_TURN, `at most ${ARMED_PER_TURN} fired per turn: ${firedPerTurn.filter((n) => n > 0).join(', ')}`);
  });
});
