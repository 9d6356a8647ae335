// Every device socket of this process, by device, from its opening until its ending is written:
// the caps on how many a device and an org hold at once, and which ending a change gives each.

import type { WebSocket } from 'uWebSockets.js';
import { KeyedCounts } from '../../actors/keyed-counts.ts';
import { SluiceError } from '../errors.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import type { DeviceConnection } from './device-record.ts';
import { closeSocket, type SocketData } from './device-socket.ts';
import type { Ending } from './device-store.ts';

/**
 * Sockets of one device held at once, from their opening until their ending is written: the open
 * one, a newer one replacing it, and a few closing. Connects of a device are written one at a time
 * (~70-80/s), so without a cap one device token opening sockets faster than that held every
 * WebSocket the process allows while they waited.
 */
export const MAX_SOCKETS_PER_DEVICE = 4;

/** 429 `too_many_device_sockets`: the device, or its org, holds as many sockets as it may; retry after a second. */
class TooManyDeviceSocketsError extends SluiceError {
  readonly retryAfterMs = 1000;
  constructor(message: string) {
    super(429, 'too_many_device_sockets', message);
  }
}

/** The key of a device's sockets (and of its chain of connection changes). */
export const deviceKeyOf = ({ device }: SocketData): string => orgScopedKey(device.org_id, device.name);

/** A plain data structure (as KeyedCounts), hence a class; DeviceSockets holds the one of the process. */
export class DeviceSocketTable {
  /** Every socket of each device, from its opening until its ending is written. */
  readonly #sockets = new Map<string, Set<WebSocket<SocketData>>>();
  /** The sockets of `#sockets` per org. */
  readonly #perOrg = new KeyedCounts();
  /** Per org, its socket admitted past its share that has not yet replaced the older one (at most one). */
  readonly #pastShare = new KeyedCounts();
  /** Device sockets one org may hold at once: half of the process's WebSockets, as live sockets by default. */
  readonly #socketsPerOrg: number;

  /** `websocketTotal` is the process's (WebSocketBudget.total). */
  constructor(websocketTotal: number) {
    this.#socketsPerOrg = Math.max(1, Math.floor(websocketTotal / 2));
  }

  /** Holds a socket that just opened among its device's. */
  add(ws: WebSocket<SocketData>): void {
    const data = ws.getUserData();
    const key = deviceKeyOf(data);
    const sockets = this.#sockets.get(key) ?? new Set();
    sockets.add(ws);
    this.#sockets.set(key, sockets);
    this.#perOrg.add(data.device.org_id);
    if (data.pastShare) this.#pastShare.add(data.device.org_id);
  }

  /** The socket admitted past its org's share has replaced the older one (recorded), or closed: the next may come. */
  replaced(data: SocketData): void {
    if (!data.pastShare) return;
    data.pastShare = false;
    this.#pastShare.subtract(data.device.org_id);
  }

  /** Lets go of a socket once its ending is written. */
  remove(ws: WebSocket<SocketData>): void {
    const data = ws.getUserData();
    const key = deviceKeyOf(data);
    const sockets = this.#sockets.get(key);
    if (sockets?.delete(ws) === true) this.#perOrg.subtract(data.device.org_id);
    if (sockets?.size === 0) this.#sockets.delete(key);
  }

  /** The sockets the device (by its key) holds now, as a copy: closing one does not change it. */
  of(key: string): Array<WebSocket<SocketData>> {
    return [...(this.#sockets.get(key) ?? [])];
  }

  /** Every socket held now, as a copy. */
  all(): Array<WebSocket<SocketData>> {
    return [...this.#sockets.values()].flatMap((sockets) => [...sockets]);
  }

  /** The keys of the devices holding a socket whose data `which` picks. */
  devicesWhere(which: (data: SocketData) => boolean): string[] {
    return [...this.#sockets].filter(([, sockets]) => [...sockets].some((ws) => which(ws.getUserData()))).map(([key]) => key);
  }

  /** Device sockets open now (for the metrics). */
  get open(): number {
    let open = 0;
    for (const sockets of this.#sockets.values()) for (const ws of sockets) if (ws.getUserData().open) open++;
    return open;
  }

  /**
   * Whether a connect of the device may replace the one socket it holds, open (nothing else of it
   * opening or ending), past its org's shares (DeviceSockets' upgrade): the count comes back once the
   * older closes (4409), when the newer one is recorded. Without it, a device whose socket went
   * half-open on a network drop was refused until its idle timeout (~2 min) while its org was at its
   * share. One such socket of an org at a time: a reconnect loop of many devices kept the org that
   * many sockets past its share, taking other orgs' part of the process's total.
   */
  mayReplacePastShare(orgId: string, name: string): boolean {
    const sockets = this.#sockets.get(orgScopedKey(orgId, name));
    return sockets?.size === 1 && [...sockets][0]!.getUserData().open && this.#pastShare.get(orgId) === 0;
  }

  /**
   * 429 when the device holds MAX_SOCKETS_PER_DEVICE sockets, or its org its share of the process's
   * WebSockets (unless `replacing`: mayReplacePastShare). True when admitted past the share.
   */
  assertRoom(orgId: string, name: string, replacing = false): boolean {
    const held = this.#sockets.get(orgScopedKey(orgId, name))?.size ?? 0;
    if (held >= MAX_SOCKETS_PER_DEVICE) {
      throw new TooManyDeviceSocketsError(`Device "${name}" has ${held} connections opening or ending (at most ${MAX_SOCKETS_PER_DEVICE}); connect again in a second.`);
    }
    const atShare = this.#perOrg.get(orgId) >= this.#socketsPerOrg;
    if (atShare && replacing) return true;
    if (atShare) {
      throw new TooManyDeviceSocketsError(`An organization's devices may hold at most ${this.#socketsPerOrg} sockets at once; connect again in a second.`);
    }
    return false;
  }

  /** Closes every open socket whose data `which` picks, with `ending`. */
  closeWhere(which: (data: SocketData) => boolean, ending: Ending & { readonly code: number }, text?: string): void {
    for (const sockets of [...this.#sockets.values()]) for (const ws of [...sockets]) if (which(ws.getUserData())) closeSocket(ws, ending, text);
  }

  /**
   * How the connection the ledger holds open ends when a change ends it: `ifOpen` when its socket
   * is open, the socket's own ending when it already closed (its ending not written yet), and
   * connection_lost when no socket of this process has it.
   */
  endingOf(key: string, connection: DeviceConnection, ifOpen: Ending): Ending {
    for (const ws of this.#sockets.get(key) ?? []) {
      const data = ws.getUserData();
      if (data.connection.id !== connection.id) continue;
      return data.open ? ifOpen : (data.ending ?? { reason: 'connection_lost', code: null });
    }
    return { reason: 'connection_lost', code: null };
  }
}
