// The pause a device's connects wait out after one of its sockets was closed for sending again
// before the moments its quota nacks named (`retry_after_ignored`, device-messages.ts). Without it
// a client that ignores every hint reconnected at once, ~40 times a second: each connect stored a
// `device.connected` / `device.disconnected` pair on credit, took the org's quota ahead of the
// devices that wait, and left them refused at their own connects. A connect during the pause is
// refused (429 `connect_paused`, with Retry-After) before it costs the quota or a write. A device
// closed so again soon after a pause ended waits twice as long, up to MAX_CONNECT_PAUSE_MS. Until
// then, its connects take no quota on credit (ingest-quota.ts): each needs its two events in the
// bucket, so such devices' connects no longer take the quota ahead of the devices that wait out
// their nacks (200 such devices against 50 polite ones at 200 events/s: the polite ones' acks in
// the first minute doubled with this). Their messages on a socket still open take no token before
// the socket's moment either (retry-stagger.ts).

import { SluiceError } from '../errors.ts';
import { growthSweep } from '../growth-sweep.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import type { DeviceHead } from './device-record.ts';

/** The shortest pause: a reconnect loop stores at most about one connection's pair of events a second. */
export const MIN_CONNECT_PAUSE_MS = 1000;
/** The longest pause, reached by doubling; also how long after a pause ends a new close still doubles it. */
export const MAX_CONNECT_PAUSE_MS = 60_000;

interface Pause {
  until: number;
  readonly lengthMs: number;
  /** Moved to end its length from a connect that found it further ahead than that (a clock set back). */
  reanchored?: boolean;
}

/** 429 `connect_paused`: the device's last socket did not wait out its quota nacks; connect after Retry-After. */
export class ConnectPausedError extends SluiceError {
  constructor(readonly retryAfterMs: number) {
    super(
      429,
      'connect_paused',
      `This device's last socket was closed (retry_after_ignored) for sending again before the retry_after_ms its nacks named; connect again in ${Math.ceil(retryAfterMs / 1000)} s, and wait out each nack's retry_after_ms.`,
    );
  }
}

const keyOf = (device: Pick<DeviceHead, 'org_id' | 'id'>): string => orgScopedKey(device.org_id, device.id);

/** A plain data structure (a map with expiry), hence a class; DeviceSockets holds the one of the process. */
export class ConnectPauses {
  /**
   * Per device, its latest pause, kept MAX_CONNECT_PAUSE_MS past its end. By the device's id, not
   * its name: one deleted and made again under the name (a new token) starts with no pause.
   */
  readonly #pauses = new Map<string, Pause>();
  /** Lets go of the pauses that no longer double the next one, as the map grows. */
  readonly #sweep = growthSweep(this.#pauses);
  /** The latest time any call was made at: a pause that had ended by then stays ended after a clock set back. */
  #latest = Number.NEGATIVE_INFINITY;

  /**
   * Pauses the device's connects from `now` for at least `waitMs` (the moment its socket was told),
   * MIN_CONNECT_PAUSE_MS at the least, or twice its last pause if that ended less than
   * MAX_CONNECT_PAUSE_MS ago; answers the pause's length.
   */
  pause(device: Pick<DeviceHead, 'org_id' | 'id'>, now: number, waitMs: number): number {
    this.#see(now);
    const key = keyOf(device);
    const last = this.#pauses.get(key);
    const doubled = last !== undefined && this.#judgedAt(last, now) < last.until + MAX_CONNECT_PAUSE_MS ? 2 * last.lengthMs : 0;
    const lengthMs = Math.min(MAX_CONNECT_PAUSE_MS, Math.max(MIN_CONNECT_PAUSE_MS, waitMs, doubled));
    this.#pauses.delete(key);
    this.#pauses.set(key, { until: now + lengthMs, lengthMs });
    this.#sweep((pause) => now >= pause.until + MAX_CONNECT_PAUSE_MS);
    return lengthMs;
  }

  /**
   * Throws ConnectPausedError while the device's pause lasts. A pause further ahead than its length
   * (the wall clock was set back since: an hour back left devices locked out for an hour) ends its
   * length from now, unless it had ended by the latest time seen (set back after it ended, it stays
   * ended: it was put back on at the set back, and took the device's credit for a minute more).
   */
  assertMayConnect(device: Pick<DeviceHead, 'org_id' | 'id'>, now: number): void {
    this.#see(now);
    const pause = this.#pauses.get(keyOf(device));
    if (pause === undefined || pause.until <= this.#judgedAt(pause, now)) return;
    if (pause.until - now > pause.lengthMs) {
      pause.until = now + pause.lengthMs;
      pause.reanchored = true;
    }
    if (pause.until > now) throw new ConnectPausedError(pause.until - now);
  }

  /**
   * Whether the device may take quota on credit to connect: it was not paused, or its last pause
   * ended MAX_CONNECT_PAUSE_MS ago or more (a close then would start afresh, not double it).
   */
  mayTakeCredit(device: Pick<DeviceHead, 'org_id' | 'id'>, now: number): boolean {
    this.#see(now);
    const pause = this.#pauses.get(keyOf(device));
    return pause === undefined || this.#judgedAt(pause, now) >= pause.until + MAX_CONNECT_PAUSE_MS;
  }

  #see(now: number): void {
    this.#latest = Math.max(this.#latest, now);
  }

  /** The time a pause's end is judged by: the latest time seen, or `now` for a pause moved after a set back (it ends from the new time on). */
  #judgedAt(pause: Pause, now: number): number {
    return pause.reanchored === true ? now : this.#latest;
  }

  /** Pauses held now, ended ones not yet swept included (for tests). */
  get size(): number {
    return this.#pauses.size;
  }
}
