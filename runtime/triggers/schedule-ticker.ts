// Sends schedules' ticks as events. Each enabled schedule has one timer on the injected clock,
// armed for its next tick. At a tick, the event, its runs and the schedule's `last_tick_ms` commit
// in one transaction, so a tick sends once across crashes and restarts. Ticks missed while the
// runtime was down are not sent one by one: only the newest one owed is sent, once, at start.
// Ticks that fall due while their writes fail (a full disk) are sent one by one once writes go
// through, oldest first: the newest CATCH_UP_LIMIT of them; older ones are passed over, with a log line.
// A wall clock set back re-arms every schedule from now (RunTimers' onClockBack).

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Clock } from '../clock.ts';
import { rootEvent, type StoredEvent } from '../events/event-record.ts';
import { withPayloadText } from '../events/payload-text.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import { refusedForDeletion, type DeletingOrgIds } from '../ledger/org-fence.ts';
import type { Logger } from '../log.ts';
import { RunTimers } from '../runs/run-timers.ts';
import type { EventWriteTurns } from '../events/event-write-turns.ts';
import { TurnGate } from '../turn-gate.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { SCHEDULE_SOURCE, catchUpStart, isTickDone, nextTickAt, oldestTickOwedSince, sendsAlike, startedAheadOfClock, tickEventId, tickOwed, type ScheduleRecord } from './schedule-record.ts';
import type { ScheduleStore } from './schedule-store.ts';
import { orgScopedKey, orgScopedParts } from '../tenancy/org-scoped-key.ts';

/** A tick whose write failed is tried again after this long. */
export const TICK_RETRY_MS = 5_000;
/** The most ticks a schedule sends one by one after its writes failed: the newest ones owed. */
export const CATCH_UP_LIMIT = 100;

/** A schedule behind after failed writes: its oldest tick not sent, as of the record it was worked out from. */
interface Behind {
  readonly fromMs: number;
  readonly schedule: ScheduleRecord;
  /** Ticks were passed over (said once, in a warning). */
  readonly passedOver?: true;
}

export interface ScheduleTickerDeps {
  readonly schedules: ScheduleStore;
  readonly orgs: OrganizationStore;
  /** Orgs deleted, or being deleted: a tick the fence refused while a deletion's mark was written is owed again should the mark fail. */
  readonly deletedOrgs?: DeletingOrgIds;
  /** Each tick's write waits for its turn (event-write-turns.ts): after any sandbox reset, within the budget of runs built. */
  readonly writeTurns: EventWriteTurns;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Counts each event sent (sluice_ingest_total{outcome="accepted_schedule"}). */
  readonly onSent: () => void;
}

/**
 * Schedules armed per event-loop turn: by start (at boot, and after the clock is set back), and again
 * after their ticks; and ticks fired per turn. A tick costs ~0.3-0.5 ms (croner walking time zones,
 * the event's write): 2,000 schedules of 20 orgs ticking at one minute, re-armed together when
 * their writes committed, held every org's requests ~400 ms.
 */
export const ARMED_PER_TURN = 32;

/** The event a schedule sends for the tick at `tickMs`, with its payload text. */
function tickEvent(schedule: ScheduleRecord, tickMs: number, nowMs: number): StoredEvent {
  const id = tickEventId(schedule, tickMs);
  const scheduledFor = new Date(tickMs).toISOString();
  const text = `{"schedule":${JSON.stringify(schedule.name)},"scheduled_for":"${scheduledFor}","data":${schedule.payload_json}}`;
  const fields = { id, org_id: schedule.org_id, type: schedule.event_type, payload: JSON.parse(text) as unknown, environment: schedule.environment, source: SCHEDULE_SOURCE };
  return withPayloadText(rootEvent({ ...fields, provider_event_id: `${schedule.name}@${scheduledFor}`, received_at_ms: nowMs }), text);
}

export class ScheduleTicker {
  readonly #d: ScheduleTickerDeps;
  readonly #timers: RunTimers;
  /** Ticks being sent: close waits for them, so none reads or writes a closed ledger. */
  readonly #inFlight = new Set<Promise<void>>();
  /** Schedules whose tick could not be written, by key: they catch up tick by tick (in memory: a restart sends the newest). */
  readonly #behind = new Map<string, Behind>();
  /** Spreads the re-arming of schedules whose ticks were written together over turns. */
  readonly #rearming = new TurnGate(ARMED_PER_TURN);
  #closed = false;

  constructor(deps: ScheduleTickerDeps) {
    this.#d = deps;
    // A clock set back re-arms every schedule from its record: the tick owed at the new time is due
    // at once (nextTickAt trusts a set back), where the old timer would wait for the old time.
    this.#timers = new RunTimers(deps.clock, (key) => this.#track(this.#tick(key)), undefined, () => void this.start(), ARMED_PER_TURN);
  }

  /** The schedules' timers (tests fire them after advancing a manual clock). */
  get timers(): RunTimers {
    return this.#timers;
  }

  /**
   * Arms every stored schedule, ARMED_PER_TURN per event-loop turn (each reads its record and works
   * out its next tick; an org may hold 100, and a rare pattern takes croner ~10 ms); one whose tick
   * is owed (missed while down) is due at once. Resolves once all are armed.
   */
  async start(): Promise<void> {
    let armed = 0;
    for (const schedule of this.#d.schedules.all()) {
      if (this.#closed) return;
      this.arm(schedule);
      if (++armed % ARMED_PER_TURN === 0) await nextTurn();
    }
  }

  /**
   * Arms the schedule for its next tick (now, if one is owed), or disarms it when disabled or its
   * org is deleted. Call after every write of it. A pattern or zone croner cannot read (stored by an
   * older version) leaves that one schedule disarmed and logged, never the runtime stopped.
   */
  arm(schedule: ScheduleRecord): void {
    const key = orgScopedKey(schedule.org_id, schedule.name);
    let at: number | undefined;
    try {
      // Not for an org deleted whose removal has not reached its schedules (a start finds them stored).
      at = schedule.enabled && this.#d.orgs.get(schedule.org_id) !== undefined ? nextTickAt(schedule, this.#d.clock.now()) : undefined;
    } catch (error) {
      this.#d.logger.error('schedule cannot be read; it sends nothing until it is changed', { org_id: schedule.org_id, schedule: schedule.name, error: String(error) });
    }
    if (at === undefined) {
      this.#timers.disarm(key);
      this.#behind.delete(key);
    } else this.#timers.arm(key, at);
  }

  /** When the schedule's timer fires, if it is armed (a tick being sent is not, until it is armed again). */
  dueAt(orgId: string, name: string): number | undefined {
    return this.#timers.dueAt(orgScopedKey(orgId, name));
  }

  /** The schedule was deleted. */
  disarm(orgId: string, name: string): void {
    this.#timers.disarm(orgScopedKey(orgId, name));
    this.#behind.delete(orgScopedKey(orgId, name));
  }

  /**
   * The org was deleted (fenced off): its schedules' timers go now. They would send nothing (a tick
   * finds the org gone), but each stayed armed until its next tick, a year away for `@yearly`.
   */
  forgetOrg(orgId: string): void {
    for (const schedule of this.#d.schedules.list(orgId)) this.disarm(orgId, schedule.name);
  }

  /** Fires no more ticks; resolves once the ticks being sent have ended. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#timers.close();
    await this.idle();
  }

  /** Resolves once the ticks being sent now have ended (and re-armed their schedules). */
  async idle(): Promise<void> {
    await Promise.all([...this.#inFlight]);
  }

  #track(tick: Promise<void>): void {
    // #tick catches its own failures; this only keeps a throw after the send (re-arming) from being unhandled.
    const settled: Promise<void> = tick
      .catch((error: unknown) => this.#d.logger.error('schedule tick failed', { error: String(error) }))
      .finally(() => this.#inFlight.delete(settled));
    this.#inFlight.add(settled);
  }

  async #tick(key: string): Promise<void> {
    const [orgId, name] = orgScopedParts(key);
    let tick: number | undefined;
    let schedule: ScheduleRecord | undefined;
    try {
      schedule = this.#d.schedules.get(orgId, name);
      // Gone, or its org is (deleted: its schedules are removed after it).
      if (schedule === undefined || this.#d.orgs.get(orgId) === undefined) {
        this.#behind.delete(key);
        return;
      }
      const now = this.#d.clock.now();
      tick = schedule.enabled ? this.#nextToSend(key, schedule, now) : undefined;
      if (tick !== undefined) await this.#send(schedule, tick, now);
    } catch (error) {
      // Its org was deleted while the tick was being sent: the fence refused its write, and nothing is owed.
      if (await refusedForDeletion(error, this.#d.deletedOrgs)) {
        this.#behind.delete(key);
        return;
      }
      const at = tick === undefined ? null : new Date(tick).toISOString();
      logFailure(this.#d.logger, 'schedule tick failed; trying again', { org_id: orgId, schedule: name, tick: at }, error);
      if (tick !== undefined && schedule !== undefined && !this.#behind.has(key)) this.#behind.set(key, { fromMs: tick, schedule });
      this.#timers.arm(key, this.#d.clock.now() + TICK_RETRY_MS);
      return;
    }
    await this.#rearming.pass();
    const current = this.#d.schedules.get(orgId, name);
    // Deleted meanwhile, or its org was (forgetOrg ran while this tick was being sent).
    if (current === undefined || this.#d.orgs.get(orgId) === undefined) {
      this.#behind.delete(key);
      return;
    }
    const behind = this.#behind.get(key);
    if (behind !== undefined && tick !== undefined) {
      // Caught up tick by tick: the next one owed goes at once.
      if (sendsAlike(current, behind.schedule) && oldestTickOwedSince(current, tick, this.#d.clock.now()) !== undefined) {
        this.#behind.set(key, { ...behind, fromMs: tick, schedule: current });
        this.#timers.arm(key, this.#d.clock.now());
        return;
      }
    }
    this.#behind.delete(key);
    this.arm(current);
  }

  /**
   * The tick to send now: the newest owed, or for a schedule behind after failed writes its oldest
   * not sent among the newest CATCH_UP_LIMIT owed (the newest, once the schedule was changed since).
   */
  #nextToSend(key: string, schedule: ScheduleRecord, now: number): number | undefined {
    const behind = this.#behind.get(key);
    if (behind === undefined) return tickOwed(schedule, now);
    if (!sendsAlike(schedule, behind.schedule)) {
      this.#behind.delete(key);
      return tickOwed(schedule, now);
    }
    const oldest = oldestTickOwedSince(schedule, behind.fromMs, now);
    if (oldest === undefined) return tickOwed(schedule, now);
    const from = catchUpStart(schedule, oldest, now, CATCH_UP_LIMIT);
    if (from > oldest) {
      if (behind.passedOver === undefined) {
        this.#d.logger.warn('schedule fell far behind while its ticks could not be written; older ticks are passed over', {
          org_id: schedule.org_id, schedule: schedule.name, passed_over_from: new Date(oldest).toISOString(), sending_from: new Date(from).toISOString(),
        });
      }
      this.#behind.set(key, { fromMs: from, schedule: behind.schedule, passedOver: true });
    }
    // Owed: a tick is done only at or before a point (isTickDone), and `from` is `oldest` or a later tick due by now.
    return from;
  }

  /**
   * Stores the tick's event with its runs and marks the tick done, in one transaction that first
   * checks the schedule is still the one read (not changed since), enabled, and not past this
   * tick. A sandbox tick of an org whose plan has no sandbox any more is passed over (marked done,
   * nothing sent); so is a tick of a schedule started while the clock ran far ahead
   * (startedAheadOfClock), which goes on from now.
   */
  async #send(schedule: ScheduleRecord, tick: number, now: number): Promise<void> {
    // Ordered after any sandbox reset in flight, as API events are, and with no await between the
    // turn and the write.
    const turn = await this.#d.writeTurns.take(schedule.org_id, schedule.environment, schedule.event_type);
    try {
      await this.#write(schedule, tick, now);
    } finally {
      turn.release();
    }
  }

  /** The tick's write, queued before its first await (#send has taken its turn). */
  async #write(schedule: ScheduleRecord, tick: number, now: number): Promise<void> {
    const { schedules, orgs } = this.#d;
    const org = orgs.get(schedule.org_id);
    const event = org !== undefined && (schedule.environment !== 'sandbox' || sandboxAllowed(org)) ? tickEvent(schedule, tick, now) : undefined;
    let sent = false;
    await schedules.recordTick(schedule.org_id, schedule.name, (current, write) => {
      // Changed since it was read (a PATCH: another pattern, payload or type): the tick is worked out
      // again from the new record when the timer is armed again. The clock is read here, after any
      // write ordered before this one, so a PATCH's fresh last_tick_ms never looks like a clock set back.
      if (current === undefined || !sendsAlike(current, schedule) || !current.enabled) return undefined;
      const nowMs = Math.max(now, this.#d.clock.now());
      if (isTickDone(current, tick, nowMs)) return undefined;
      if (startedAheadOfClock(current, nowMs)) return { ...current, last_tick_ms: nowMs };
      sent = event !== undefined && write(event);
      // Its event is stored already (sent before a clock set back): it was sent, though not now.
      if (!sent && event !== undefined) return { ...current, last_tick_ms: tick, last_sent_tick_ms: Math.max(current.last_sent_tick_ms ?? tick, tick) };
      if (!sent) return { ...current, last_tick_ms: tick };
      // A schedule that sent a tick is past its start: set backs follow the usual rules (isTickDone).
      const { started_ms: _started, ...rest } = current;
      return { ...rest, last_tick_ms: tick, last_sent_tick_ms: tick };
    });
    if (sent) this.#d.onSent();
  }
}
