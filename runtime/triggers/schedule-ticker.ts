// Sends schedules' ticks as events. Each enabled schedule has one timer on the injected clock,
// armed for its next tick. At a tick, the event, its runs and the schedule's `last_tick_ms` commit
// in one transaction, so a tick sends once across crashes and restarts. Ticks missed while the
// runtime was down are not sent one by one: only the newest one owed is sent, once, at start.
// A wall clock set back re-arms every schedule from now (RunTimers' onClockBack).

import type { Clock } from '../clock.ts';
import { rootEvent, type StoredEvent } from '../events/event-record.ts';
import { withPayloadText } from '../events/payload-text.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import type { Logger } from '../log.ts';
import type { SandboxGenerations } from '../events/sandbox-generation.ts';
import { RunTimers } from '../runs/run-timers.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { SCHEDULE_SOURCE, isTickDone, nextTickAt, sendsAlike, startedAheadOfClock, tickEventId, tickOwed, type ScheduleRecord } from './schedule-record.ts';
import type { ScheduleStore } from './schedule-store.ts';
import { orgScopedKey, orgScopedParts } from '../tenancy/org-scoped-key.ts';

/** A tick whose write failed is tried again after this long. */
export const TICK_RETRY_MS = 5_000;

export interface ScheduleTickerDeps {
  readonly schedules: ScheduleStore;
  readonly orgs: OrganizationStore;
  readonly generations: SandboxGenerations;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Counts each event sent (sluice_ingest_total{outcome="accepted_schedule"}). */
  readonly onSent: () => void;
}

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

  constructor(deps: ScheduleTickerDeps) {
    this.#d = deps;
    // A clock set back re-arms every schedule from its record: the tick owed at the new time is due
    // at once (nextTickAt trusts a set back), where the old timer would wait for the old time.
    this.#timers = new RunTimers(deps.clock, (key) => this.#track(this.#tick(key)), undefined, () => this.start());
  }

  /** The schedules' timers (tests fire them after advancing a manual clock). */
  get timers(): RunTimers {
    return this.#timers;
  }

  /** Arms every stored schedule; one whose tick is owed (missed while down) is due at once. */
  start(): void {
    for (const schedule of this.#d.schedules.all()) this.arm(schedule);
  }

  /**
   * Arms the schedule for its next tick (now, if one is owed), or disarms it when disabled. Call
   * after every write of it. A pattern or zone croner cannot read (stored by an older version)
   * leaves that one schedule disarmed and logged, never the runtime stopped.
   */
  arm(schedule: ScheduleRecord): void {
    const key = orgScopedKey(schedule.org_id, schedule.name);
    let at: number | undefined;
    try {
      at = schedule.enabled ? nextTickAt(schedule, this.#d.clock.now()) : undefined;
    } catch (error) {
      this.#d.logger.error('schedule cannot be read; it sends nothing until it is changed', { org_id: schedule.org_id, schedule: schedule.name, error: String(error) });
    }
    if (at === undefined) this.#timers.disarm(key);
    else this.#timers.arm(key, at);
  }

  /** The schedule was deleted. */
  disarm(orgId: string, name: string): void {
    this.#timers.disarm(orgScopedKey(orgId, name));
  }

  /** Fires no more ticks; resolves once the ticks being sent have ended. */
  async close(): Promise<void> {
    this.#timers.close();
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
    try {
      const schedule = this.#d.schedules.get(orgId, name);
      if (schedule === undefined) return;
      const now = this.#d.clock.now();
      tick = schedule.enabled ? tickOwed(schedule, now) : undefined;
      if (tick !== undefined) await this.#send(schedule, tick, now);
    } catch (error) {
      const at = tick === undefined ? null : new Date(tick).toISOString();
      logFailure(this.#d.logger, 'schedule tick failed; trying again', { org_id: orgId, schedule: name, tick: at }, error);
      this.#timers.arm(key, this.#d.clock.now() + TICK_RETRY_MS);
      return;
    }
    const current = this.#d.schedules.get(orgId, name);
    if (current !== undefined) this.arm(current);
  }

  /**
   * Stores the tick's event with its runs and marks the tick done, in one transaction that first
   * checks the schedule is still the one read (not changed since), enabled, and not past this
   * tick. A sandbox tick of an org whose plan has no sandbox any more is passed over (marked done,
   * nothing sent); so is a tick of a schedule started while the clock ran far ahead
   * (startedAheadOfClock), which goes on from now.
   */
  async #send(schedule: ScheduleRecord, tick: number, now: number): Promise<void> {
    const { schedules, orgs, generations } = this.#d;
    // Ordered after any sandbox reset in flight, as API events are (sandbox-generation.ts).
    if (schedule.environment === 'sandbox') await generations.quiet(schedule.org_id);
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
      if (!sent) return { ...current, last_tick_ms: tick };
      // A schedule that sent a tick is past its start: set backs follow the usual rules (isTickDone).
      const { started_ms: _started, ...rest } = current;
      return { ...rest, last_tick_ms: tick, last_sent_tick_ms: tick };
    });
    if (sent) this.#d.onSent();
  }
}
