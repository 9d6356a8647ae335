// Durable storage of devices under [orgId, name], and the writes that change a device's connection:
// each stores the record and the connection's state event (with its runs) in one transaction, so
// the ledger's idea of "connected" and the events workflows see never disagree, even after a crash.
// Records are read through a cache (record-cache.ts): each device message reads its device twice,
// and a device may declare up to ~1 MB of schemas, which decoding per message made cost 20-30 ms.
// The schemas are stored as JSON text (StoredDevice, device-record.ts): a token check (head), a
// connection's start or end, a sandbox reset and a start read and write records without parsing them.

import { ConflictError, notFound } from '../errors.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { EventStore } from '../events/event-store.ts';
import { nextUpdateStamp } from '../update-stamp.ts';
import { changeRecord } from '../ledger/change-record.ts';
import { insertCapped } from '../ledger/insert-capped.ts';
import type { Ledger, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import { everyRecord, orgRecords, orgRecordsInTurns } from '../ledger/org-records.ts';
import { RecordCache } from '../ledger/record-cache.ts';
import { schemaRecordWeight } from '../sources/schema-record-weight.ts';
import type { DeletedOrgIds } from '../ledger/org-fence.ts';
import {
  MAX_DEVICES_PER_ORG,
  connectedEvent,
  deviceSource,
  disconnectedEvent,
  type DeviceConnection,
  type DeviceHead,
  type DeviceRecord,
  type StoredDevice,
  deviceFromStored,
  headOfStored,
  storedDevice,
  type DisconnectReason,
} from './device-record.ts';

/** Devices a start reads and ends the connections of in one write, and such writes in flight at once (endConnectionsLeftOpen). */
const RESTART_WRITE_DEVICES = 8;
const RESTART_WRITES_AT_ONCE = 8;

/** How a connection that ends is told apart: the reason and the WebSocket close code, if there was one. */
export interface Ending {
  readonly reason: DisconnectReason;
  readonly code: number | null;
}

export class DeviceStore {
  readonly #root: LedgerRoot;
  /** [orgId, name] -> StoredDevice (schemas as JSON text: device-record.ts) */
  readonly #table: LedgerTable;
  readonly #events: EventStore;
  /** Every write of the table goes through `writing`, so reads never see a record older than the ledger's. */
  readonly #cache: RecordCache<DeviceRecord>;
  /** Each device without its schemas (DeviceHead), bounded by count, forgotten with the whole records. */
  readonly #heads = new RecordCache<DeviceHead>();

  constructor(ledger: Ledger, events: EventStore) {
    this.#root = ledger.root;
    this.#table = ledger.openDatabase('devices');
    this.#cache = new RecordCache<DeviceRecord>(undefined, schemaRecordWeight(this.#table));
    this.#events = events;
  }

  /** The device, its schemas parsed (frozen when cached: shared by every reader). */
  get(orgId: string, name: string): DeviceRecord | undefined {
    return this.#cache.read(orgId, name, () => {
      const stored = this.#stored(orgId, name);
      return stored === undefined ? undefined : deviceFromStored(stored);
    });
  }

  /** The device without its schemas (their text is read, not parsed). */
  head(orgId: string, name: string): DeviceHead | undefined {
    return this.#heads.read(orgId, name, () => {
      const stored = this.#stored(orgId, name);
      return stored === undefined ? undefined : headOfStored(stored);
    });
  }

  /** The device as stored, decoded and not kept in the cache: for a walk over every device of an org (the export). */
  uncached(orgId: string, name: string): DeviceRecord | undefined {
    const stored = this.#stored(orgId, name);
    return stored === undefined ? undefined : deviceFromStored(stored);
  }

  #stored(orgId: string, name: string): StoredDevice | undefined {
    return this.#table.get([orgId, name]) as StoredDevice | undefined;
  }

  /** Runs `write`, which changes devices of `orgId` (here, or within a caller's transaction: endConnectionsWithin). */
  writing<T>(orgId: string, write: () => Promise<T>): Promise<T> {
    return this.#heads.writing(orgId, () => this.#cache.writing(orgId, write));
  }

  require(orgId: string, name: string): DeviceRecord {
    const device = this.get(orgId, name);
    if (device === undefined) throw notFound(`Device "${name}"`, 'name');
    return device;
  }

  /** Every org's devices, read as stored one at a time as iterated (keys first: iterating across awaits holds no LMDB snapshot). */
  *all(): Generator<DeviceRecord> {
    for (const stored of everyRecord<StoredDevice>(this.#table)) yield deviceFromStored(stored);
  }

  /**
   * The org's devices without their schemas, one per event-loop turn (a record from before data
   * format 7 decodes its schemas, ~30 ms for ~1 MB of them, and an org may hold 1,000 devices).
   */
  headsInTurns(orgId: string): AsyncGenerator<DeviceHead> {
    return orgRecordsInTurns(this.#table, orgId, (name) => this.head(orgId, name));
  }

  /** The org's devices in name order after `afterName`, read as iterated (list pages). */
  *listAfter(orgId: string, afterName: string | undefined): Iterable<DeviceRecord> {
    for (const stored of orgRecords<StoredDevice>(this.#table, orgId, afterName)) yield deviceFromStored(stored);
  }

  /**
   * Resolves once the device is durable; 409 if the name is taken in this org, or the org holds
   * MAX_DEVICES_PER_ORG. `allowed` runs as the write is queued, after the waits before it: a refusal
   * it throws (a key revoked meanwhile) writes nothing.
   */
  async create(device: DeviceRecord, allowed: () => void = () => undefined): Promise<void> {
    // A device made under the name of a deleted one starts with no dedup memory (Inbox.createFresh).
    const exists = (): boolean => this.#table.get([device.org_id, device.name]) !== undefined;
    const outcome = await this.#events.inbox.createFresh(device.org_id, deviceSource(device.name), exists, () => {
      allowed();
      return this.writing(device.org_id, () => insertCapped(this.#root, this.#table, device.org_id, device.name, storedDevice(device), MAX_DEVICES_PER_ORG));
    });
    if (outcome === 'exists') throw new ConflictError('device_exists', `A device named "${device.name}" already exists.`, { field: 'name' });
    if (outcome === 'full') throw new ConflictError('device_limit_reached', `An organization can hold at most ${MAX_DEVICES_PER_ORG} devices; delete one first.`);
  }

  /** Stores `change(stored)`, applied to the device as stored when the write runs; 404 if the device is gone, or `change` answers undefined (not the device meant). */
  async update(orgId: string, name: string, change: (current: DeviceRecord) => DeviceRecord | undefined): Promise<DeviceRecord> {
    let updated: DeviceRecord | undefined;
    await this.writing(orgId, () =>
      changeRecord<StoredDevice>(this.#root, this.#table, [orgId, name], (stored) => {
        updated = change(deviceFromStored(stored));
        return updated === undefined ? undefined : storedDevice(updated);
      }),
    );
    if (updated === undefined) throw notFound(`Device "${name}"`, 'name');
    return updated;
  }

  /** Stores a new token hash (the socket opened with the old one is the caller's to close); 404 if gone or another device (`id`) holds the name. */
  rotateToken(orgId: string, name: string, id: string, hash: string, prefix: string, nowMs: number): Promise<DeviceRecord> {
    return this.update(orgId, name, (current) => (current.id !== id ? undefined : { ...current, token_hash: hash, token_prefix: prefix, updated_at: nextUpdateStamp(current.updated_at, nowMs) }));
  }

  /**
   * Removes the device; an open connection gets its `device.disconnected` (`ending` says how) in the
   * same write. The dedup memory of its messages stays until the prune, or a device made again
   * under its name (create), so the delete is one small write however many messages it sent.
   * 404 if gone, or if another device (`id`) holds the name now.
   */
  async delete(orgId: string, name: string, id: string, ending: (connection: DeviceConnection) => Ending, nowMs: number, matches: (stored: StoredDevice) => void = () => undefined): Promise<void> {
    const removed = await this.#events.inbox.deleting(orgId, deviceSource(name), () => this.writing(orgId, () => this.#events.writeWithEvents((write) => {
      const current = this.#stored(orgId, name);
      if (current === undefined || current.id !== id) return false;
      // Before anything is written: a refusal (a stale If-Match) leaves the device as it is.
      matches(current);
      if (current.connection !== null) {
        const { reason, code } = ending(current.connection);
        write(disconnectedEvent(current, current.connection, reason, code, nowMs));
      }
      this.#table.remove([orgId, name]);
      return true;
    })));
    if (!removed) throw notFound(`Device "${name}"`, 'name');
  }

  /**
   * Records `connection` as the device's open one, with its `device.connected`; a connection the
   * ledger still holds open ends first (`previous` says why). Resolves false, writing nothing, when
   * the device is gone or its token changed since `device` was read (the socket must not stay).
   */
  connect(device: DeviceHead, connection: DeviceConnection, previous: (connection: DeviceConnection) => Ending): Promise<boolean> {
    const { org_id: orgId, name } = device;
    return this.writing(orgId, () => this.#events.writeWithEvents((write) => {
      const current = this.#stored(orgId, name);
      if (current === undefined || current.id !== device.id || current.token_hash !== device.token_hash) return false;
      let record = inTextForm(current);
      if (current.connection !== null) record = this.#ended(record, current.connection, previous(current.connection), connection.connected_at_ms, write);
      write(connectedEvent(record, connection));
      this.#table.put([orgId, name], { ...record, connection });
      return true;
    }));
  }

  /**
   * Ends `connection` with its `device.disconnected`, if the ledger still holds it open (not ended
   * by a newer connection, a deletion or a restart). Resolves whether it wrote anything.
   */
  disconnect(device: DeviceHead, connection: DeviceConnection, ending: Ending, nowMs: number): Promise<boolean> {
    return this.writing(device.org_id, () => this.#events.writeWithEvents((write) => {
      const current = this.#stored(device.org_id, device.name);
      if (current === undefined || current.id !== device.id || current.connection?.id !== connection.id) return false;
      this.#table.put([device.org_id, device.name], this.#ended(current, connection, ending, nowMs, write));
      return true;
    }));
  }

  /**
   * Forgets the open connections of the org's sandbox `devices` without an event (a sandbox reset:
   * their `device.connected` is among what it removes); returns their ids, whose sockets the caller
   * closes once the write is durable. A device gone, or made again under the name (another id), is
   * left alone. Call inside a write transaction, itself inside `writing` for the org.
   */
  endConnectionsWithin(orgId: string, devices: readonly { readonly name: string; readonly id: string }[], reason: DisconnectReason, nowMs: number): string[] {
    const ended: string[] = [];
    for (const { name, id } of devices) {
      const device = this.#stored(orgId, name);
      if (device === undefined || device.id !== id || device.environment !== 'sandbox' || device.connection === null) continue;
      ended.push(device.connection.id);
      this.#table.put([orgId, name], this.#closed(device, reason, nowMs));
    }
    return ended;
  }

  /**
   * At start, before any device may connect: every connection the ledger holds open died with the
   * previous process. Each gets its `device.disconnected` (reason runtime_restarted); resolves with
   * how many. Records are read inside the writes that end them, a few at a time: each may hold ~1 MB
   * of schemas (several MB decoded), so read all at once they did not fit the heap, and each is
   * decoded once.
   */
  async endConnectionsLeftOpen(nowMs: number, deletedOrgs?: DeletedOrgIds): Promise<number> {
    // Keys only (no values decoded), read whole: a range left open across the writes' awaits would
    // hold its snapshot, and LMDB could reuse none of the pages they free.
    const keys = [...this.#table.getKeys({})] as [string, string][];
    const groups: { orgId: string; names: string[] }[] = [];
    for (const [orgId, name] of keys) {
      // A deleted org's devices go with it (org-deletion.ts), and it takes no write.
      if (deletedOrgs?.has(orgId) === true) continue;
      const last = groups.at(-1);
      if (last !== undefined && last.orgId === orgId && last.names.length < RESTART_WRITE_DEVICES) last.names.push(name);
      else groups.push({ orgId, names: [name] });
    }
    let ended = 0;
    // A few writes at once (committed together), not all: each holds its records' bytes until its commit.
    for (let from = 0; from < groups.length; from += RESTART_WRITES_AT_ONCE) {
      const wave = groups.slice(from, from + RESTART_WRITES_AT_ONCE).map(({ orgId, names }) =>
        this.writing(orgId, () => this.#events.writeWithEvents((write) => this.#endLeftOpenWithin(orgId, names, nowMs, write))),
      );
      for (const count of await Promise.all(wave)) ended += count;
    }
    return ended;
  }

  /** Ends the open connections of the org's devices `names` as the previous process's; how many. */
  #endLeftOpenWithin(orgId: string, names: readonly string[], nowMs: number, write: (event: StoredEvent) => void): number {
    let ended = 0;
    for (const name of names) {
      const device = this.#stored(orgId, name);
      if (device === undefined || device.connection === null) continue;
      this.#table.put([orgId, name], this.#ended(device, device.connection, { reason: 'runtime_restarted', code: null }, nowMs, write));
      ended++;
    }
    return ended;
  }

  /** The record with `connection` ended, after writing its `device.disconnected` (unless stored already). */
  #ended(device: StoredDevice, connection: DeviceConnection, ending: Ending, nowMs: number, write: (event: StoredEvent) => void): StoredDevice {
    write(disconnectedEvent(device, connection, ending.reason, ending.code, nowMs));
    return this.#closed(device, ending.reason, nowMs);
  }

  /** The record with no open connection, last ended at `nowMs` for `reason`. */
  #closed(device: StoredDevice, reason: DisconnectReason, nowMs: number): StoredDevice {
    return { ...inTextForm(device), connection: null, last_disconnected_at: new Date(nowMs).toISOString(), last_disconnect_reason: reason };
  }
}

/** A stored record with its schemas as text: one from before data format 7 is rewritten so when its connection next changes. */
function inTextForm(stored: StoredDevice): StoredDevice {
  return stored.event_types_json !== undefined ? stored : storedDevice(deviceFromStored(stored));
}
