// The device WebSocket at /devices/:org_id/:device: a device authenticates with its own token, its
// connection opening and ending become `device.connected` / `device.disconnected` events
// (device-connection.ts), and each message frame becomes an event, acknowledged once durable (device-messages.ts).
// Everything that changes a device's connection (a socket opening or ending, a token rotation, a
// deletion) runs one at a time per device, and first stops the sockets it ends from storing and
// waits for their messages: each connection's events come before its `device.disconnected`.

import { randomBytes } from 'node:crypto';
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { RetryableError, SluiceError } from '../errors.ts';
import { WriteRetries } from '../ledger/write-retries.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import { ConnectPauses } from './connect-pauses.ts';
import { EVENTS_PER_CONNECTION, recordConnection, recordEnding, SANDBOX_DISABLED, sandboxDisallowed } from './device-connection.ts';
import {
  CLOSE_DEVICE_DELETED,
  CLOSE_NOT_RECORDED,
  CLOSE_RUNTIME_STOPPING,
  CLOSE_SANDBOX_RESET,
  CLOSE_TOKEN_ROTATED,
  MAX_DEVICE_MESSAGE_BYTES,
} from './device-frame.ts';
import { DeviceMessages, type DeviceMessageDeps } from './device-messages.ts';
import { DISCONNECTED_EVENT_TYPE, type DeviceConnection, type DeviceHead, type StoredDevice } from './device-record.ts';
import { closeSocket, quiesce, resumeStoring, type SocketData } from './device-socket.ts';
import { deviceKeyOf, DeviceSocketTable } from './device-socket-table.ts';
import type { Ending } from './device-store.ts';
import { admitDevice, DEVICE_PATH, DEVICE_PLAIN_GET, DEVICE_PROTOCOL } from './device-upgrade.ts';
import { assertWebSocketHandshake } from '../http/upgrade-required.ts';
import type { UpgradeAnswered } from '../metrics.ts';
import { ReadQuery } from '../http/read-query.ts';
import { refuseUpgrade } from '../http/refuse-upgrade.ts';
import { assertHeadFits } from '../http/header-cap.ts';
import { namesSomething, Router } from '../http/router.ts';
import type { WebSocketBudget } from '../http/websocket-budget.ts';
import { OrgDeletedError, type DeletingOrgIds } from '../ledger/org-fence.ts';
import { offeredSubprotocols } from '../http/offered-subprotocols.ts';

/** Answers queued to a device that does not read them; past it the socket is dropped (1006). */
const MAX_BACKPRESSURE = 64 * 1024;
/** Seconds without a frame or a pong before uWS drops the socket (it pings on its own before that). */
const IDLE_TIMEOUT_S = 120;

const isSandboxOf = (orgId: string, { device }: SocketData): boolean => device.org_id === orgId && device.environment === 'sandbox';

/** What the sockets need: what their messages need (device-messages.ts), and the process's WebSocket total. */
export interface DeviceSocketDeps extends DeviceMessageDeps {
  readonly websockets: WebSocketBudget;
  /** Told of each upgrade's answer (the request histogram). */
  readonly answered: UpgradeAnswered;
  /** Deleted orgs: the connections of their devices are not ended at start (their records go with the org), nor after (recordEnding). */
  readonly deletedOrgs?: DeletingOrgIds;
}

export class DeviceSockets {
  readonly #d: DeviceSocketDeps;
  /** Every socket of each device, from its opening until its ending is written. */
  readonly #sockets: DeviceSocketTable;
  /** The tail of each device's chain of connection changes (see the header). */
  readonly #chains = new Map<string, Promise<unknown>>();
  readonly #messages: DeviceMessages;
  /** Devices whose last socket did not wait out its quota nacks: their connects wait (connect-pauses.ts). */
  readonly #pauses = new ConnectPauses();
  /** Endings that could not be written (a full disk), by connection id, each tried again after its pause. */
  readonly #endingRetries: WriteRetries;
  readonly #unwrittenEndings = new Map<string, () => void>();
  #accepting = false;
  #stopping = false;

  constructor(app: TemplatedApp, deps: DeviceSocketDeps) {
    this.#d = deps;
    this.#sockets = new DeviceSocketTable(deps.websockets.total);
    this.#messages = new DeviceMessages(deps, this.#pauses);
    this.#endingRetries = new WriteRetries(deps.clock, (connectionId) => this.#unwrittenEndings.get(connectionId)?.());
    app.ws<SocketData>(DEVICE_PATH, {
      maxPayloadLength: 2 * MAX_DEVICE_MESSAGE_BYTES,
      maxBackpressure: MAX_BACKPRESSURE,
      // (The uWS 20.30 typings declare this flag as a number.)
      closeOnBackpressureLimit: 1,
      idleTimeout: IDLE_TIMEOUT_S,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => {
        const started = performance.now();
        const rawOrgId = req.getParameter(0) ?? '';
        const rawName = req.getParameter(1) ?? '';
        const offered = offeredSubprotocols(req);
        const query = new ReadQuery(req.getQuery() ?? '');
        const queryToken = query.get('token');
        const key = req.getHeader('sec-websocket-key');
        const extensions = req.getHeader('sec-websocket-extensions');
        let device: DeviceHead;
        let pastShare = false;
        try {
          assertHeadFits(req);
          assertWebSocketHandshake(req, DEVICE_PLAIN_GET);
          if (!this.#accepting) throw new RetryableError('starting', 'Sluice is starting or stopping; connect again in a few seconds.', 2000);
          const orgId = Router.decodeSegment(rawOrgId);
          const name = Router.decodeSegment(rawName);
          // Past the REST routes' parameter cap a name names nothing (and would not fit an LMDB key): as unknown, 401.
          const named = namesSomething(orgId) && namesSomething(name);
          const org = named ? deps.orgs.get(orgId) : undefined;
          device = admitDevice({ offered, queryToken }, org, org === undefined ? undefined : deps.devices.head(orgId, name));
          // After the token too, and before the quota: a paused device's connect costs its org nothing.
          this.#pauses.assertMayConnect(device, deps.clock.now());
          // After the token: an org's share of the sockets is nobody else's to probe.
          const replacing = this.#sockets.mayReplacePastShare(orgId, name);
          pastShare = deps.websockets.assertRoom(orgId, replacing);
          pastShare = this.#sockets.assertRoom(orgId, name, replacing) || pastShare;
          query.assertNoRepeats();
          query.assertAllAsked();
          // A connection writes two events (and their runs), its device.connected and, however it
          // ends, its device.disconnected: a reconnect loop counts against the org's ingest quota
          // like the messages do, or it would write events past any rate. Given back if it is never
          // recorded. On credit, unless the device was paused lately (connect-pauses.ts).
          deps.quota.charge(org!, EVENTS_PER_CONNECTION, this.#pauses.mayTakeCredit(device, deps.clock.now()));
        } catch (error) {
          const refusal = error instanceof SluiceError ? error : new SluiceError(500, 'internal_error', 'The device could not be admitted.');
          refuseUpgrade(res, refusal);
          deps.answered(DEVICE_PATH, refusal.status, started);
          return;
        }
        const connection: DeviceConnection = { id: `con_${randomBytes(12).toString('hex')}`, connected_at_ms: deps.clock.now() };
        const data: SocketData = { device, connection, ready: Promise.resolve(false), inFlight: new Set(), open: true, accepting: true, recorded: false, attempted: false, ending: undefined, pastShare };
        res.upgrade<SocketData>(data, key, offered.length > 0 ? DEVICE_PROTOCOL : '', extensions, context);
        deps.answered(DEVICE_PATH, 101, started);
      },
      open: (ws) => {
        deps.websockets.opened(ws.getUserData().device.org_id);
        const data = ws.getUserData();
        this.#sockets.add(ws);
        data.ready = this.#serially(deviceKeyOf(data), () => recordConnection(deps, this.#sockets, ws, data)).catch(() => false);
        // Recorded, the older socket is closed (4409): the org is back within its share.
        void data.ready.then(() => this.#sockets.replaced(data));
      },
      message: (ws, message, isBinary) => this.#messages.onMessage(ws, Buffer.from(new Uint8Array(message)), isBinary),
      close: (ws, code) => {
        deps.websockets.closed(ws.getUserData().device.org_id);
        const data = ws.getUserData();
        data.open = false;
        data.accepting = false;
        this.#sockets.replaced(data);
        const ending: Ending = { reason: data.ending?.reason ?? (code === 1006 ? 'connection_lost' : 'client_closed'), code };
        data.ending = ending;
        this.#writeEnding(ws, data, ending, deps.clock.now());
      },
    });
  }

  /** Endings of closed sockets waiting to be written again (tests fire their timers after advancing the clock). */
  get endingRetries(): WriteRetries {
    return this.#endingRetries;
  }

  /**
   * Writes a closed socket's ending, after the device's earlier changes. One that cannot be written
   * (a full disk) is tried again after a pause, and its socket stays among the device's until then,
   * so a newer connection of the device ends it with its own reason. A stop tries it once more; if
   * that fails too, the next start ends it.
   */
  #writeEnding(ws: WebSocket<SocketData>, data: SocketData, ending: Ending, at: number): void {
    const id = data.connection.id;
    void this.#serially(deviceKeyOf(data), () => recordEnding(this.#d, data, ending, at)).then((written) => {
      if (!written && !this.#stopping) {
        this.#unwrittenEndings.set(id, () => this.#writeEnding(ws, data, ending, at));
        this.#endingRetries.failed(id);
        return;
      }
      this.#unwrittenEndings.delete(id);
      this.#endingRetries.cleared(id);
      this.#sockets.remove(ws);
    });
  }

  /** Device sockets open now (for the metrics). */
  get openSockets(): number {
    return this.#sockets.open;
  }

  /** Ends the connections the previous process left open, then lets devices connect; call after run recovery. */
  async start(): Promise<void> {
    const ended = await this.#d.devices.endConnectionsLeftOpen(this.#d.clock.now(), this.#d.deletedOrgs);
    if (ended > 0) this.#d.logger.info('device connections left open by the previous process ended', { count: ended });
    this.#accepting = true;
  }

  /**
   * Stores a new token (`rotate` writes it) and closes the device's sockets (4401): no message
   * sent with the old token is stored once the rotation is durable. Resolves once the endings of
   * the connections it closed are written too (they queue behind it as the sockets close), so that
   * what the caller reads next shows the device disconnected.
   */
  async rotateToken<T>(orgId: string, name: string, rotate: () => Promise<T>): Promise<T> {
    const rotated = await this.#changeDevice(orgId, name, rotate, { reason: 'token_rotated', code: CLOSE_TOKEN_ROTATED });
    await this.#serially(orgScopedKey(orgId, name), async () => undefined);
    return rotated;
  }

  /**
   * Deletes the device (its open connection's `device.disconnected` in the same write) and closes its
   * sockets (4404). `allowed` runs once the device's turn comes, before the write, and `matches` in
   * the write on the device as stored then (a stale If-Match): a refusal either throws writes nothing.
   */
  deleteDevice(orgId: string, name: string, id: string, allowed: () => void = () => undefined, matches?: (stored: StoredDevice) => void): Promise<void> {
    const ending = { reason: 'device_deleted', code: CLOSE_DEVICE_DELETED } as const;
    const key = orgScopedKey(orgId, name);
    return this.#changeDevice(orgId, name, async () => {
      allowed();
      // Its open connection's `device.disconnected` is written in its turn, as every event is
      // (event-write-turns.ts: after any sandbox reset of the org, within the budget of runs built).
      const environment = this.#d.devices.head(orgId, name)?.environment;
      const turn = environment === undefined ? undefined : await this.#d.writeTurns.take(orgId, environment, DISCONNECTED_EVENT_TYPE);
      try {
        if (turn?.waited) allowed();
        return await this.#d.devices.delete(orgId, name, id, (open) => this.#sockets.endingOf(key, open, ending), this.#d.clock.now(), matches);
      } finally {
        turn?.release();
      }
    }, ending);
  }

  /**
   * The org's plan lost its sandbox: its sandbox devices' sockets close with 4402, once the messages
   * they are storing are answered. Each device's in its queue of connection changes, as a rotation:
   * a connection being recorded is recorded first (then stopped like the others), and no other
   * change of the device is under way to be undone should the plan come back meanwhile.
   */
  async dropSandboxSocketsIfDisallowed(orgId: string): Promise<void> {
    if (!sandboxDisallowed(this.#d.orgs, orgId)) return;
    const keys = this.#sockets.devicesWhere((data) => isSandboxOf(orgId, data));
    await Promise.all(
      keys.map((key) =>
        this.#serially(key, async () => {
          if (!sandboxDisallowed(this.#d.orgs, orgId)) return;
          // Only the sandbox device's: a production device may hold its name now (made again after a delete).
          const sandboxSockets = (): Array<WebSocket<SocketData>> => this.#sockets.of(key).filter((ws) => isSandboxOf(orgId, ws.getUserData()));
          const stopped = await quiesce(sandboxSockets());
          // The plan may have changed back meanwhile.
          if (!sandboxDisallowed(this.#d.orgs, orgId)) return resumeStoring(stopped);
          for (const ws of sandboxSockets()) closeSocket(ws, SANDBOX_DISABLED);
        }),
      ),
    );
  }

  /**
   * Once a sandbox reset is durable: closes the sockets of the connections it ended (4410), so their
   * devices connect again into the new sandbox. Their endings write nothing (the ledger holds no
   * connection of theirs any more). Their messages that waited for the reset to end are answered
   * first (`connection_closing`: none is stored): closed at once, those got no answer at all.
   */
  closeConnectionsEndedByReset(orgId: string, connectionIds: readonly string[]): void {
    const ended = new Set(connectionIds);
    const endedByReset = ({ device, connection }: SocketData): boolean => device.org_id === orgId && ended.has(connection.id);
    void quiesce(this.#sockets.all().filter((ws) => endedByReset(ws.getUserData()))).then(() =>
      this.#sockets.closeWhere(endedByReset, { reason: 'sandbox_reset', code: CLOSE_SANDBOX_RESET }, 'the sandbox was reset; connect again'),
    );
  }

  /** Closes every socket of a deleted org's devices (4404); their endings write nothing (the org takes no writes). */
  closeSocketsOfOrg(orgId: string): void {
    this.#sockets.closeWhere(({ device }) => device.org_id === orgId, { reason: 'device_deleted', code: CLOSE_DEVICE_DELETED }, 'organization_deleted: the organization was deleted');
  }

  /** Lets go of what the org's messages left in memory once its removal is finished. */
  forgetOrg(orgId: string): void {
    this.#messages.forgetOrg(orgId);
  }

  /**
   * A sandbox reset failed, perhaps after it committed (a failed flush): whether it ended the
   * org's sandbox connections is unknown, so their sockets close (1011) and the devices connect
   * again. An ending the ledger still holds open is written as usual; one the reset ended writes nothing.
   */
  closeSandboxSocketsAfterUnconfirmedReset(orgId: string): void {
    const ending = { reason: 'connection_lost', code: CLOSE_NOT_RECORDED } as const;
    this.#sockets.closeWhere(({ device }) => device.org_id === orgId && device.environment === 'sandbox', ending, 'the sandbox reset could not be confirmed; connect again');
  }

  /**
   * Refuses new sockets, lets the open ones finish storing (each message being stored is acked, a
   * later one is nacked `connection_closing`, as before a rotation), closes them (1001) and resolves
   * once their endings are durable. Closing at once dropped the acks of messages it then stored: the
   * devices sent them again after every clean stop.
   */
  async close(): Promise<void> {
    this.#accepting = false;
    this.#stopping = true;
    this.#endingRetries.close();
    await quiesce(this.#sockets.all());
    this.#sockets.closeWhere(() => true, { reason: 'runtime_stopped', code: CLOSE_RUNTIME_STOPPING });
    // Endings still waiting get one last try (the disk may have room again); one that fails is
    // left to the next start (runtime_restarted).
    for (const retry of [...this.#unwrittenEndings.values()]) retry();
    while (this.#chains.size > 0) await Promise.allSettled([...this.#chains.values()]);
  }

  /** Runs `task` after every earlier connection change of the device has finished. */
  #serially<T>(key: string, task: () => Promise<T>): Promise<T> {
    const outcome = (this.#chains.get(key) ?? Promise.resolve()).then(task);
    const tail = outcome.catch(() => undefined);
    this.#chains.set(key, tail);
    void tail.then(() => {
      if (this.#chains.get(key) === tail) this.#chains.delete(key);
    });
    return outcome;
  }

  /**
   * A change that ends the device's connections: quiesce, write, then close every socket of the
   * device (`ending`). A write that fails may still have committed (its flush failed), so the
   * sockets close then too (1011): the device reconnects and finds out what holds.
   */
  #changeDevice<T>(orgId: string, name: string, write: () => Promise<T>, ending: Ending & { readonly code: number }): Promise<T> {
    const key = orgScopedKey(orgId, name);
    return this.#serially(key, async () => {
      const stopped = await quiesce(this.#sockets.of(key));
      let result: T;
      try {
        result = await write();
      } catch (error) {
        // Refused below the disk floor, as a request (404: the device the caller meant is gone,
        // another holds the name now) or by the fence of an org being deleted: nothing was written,
        // so the sockets go on storing.
        if (error instanceof DiskSpaceLowError || error instanceof OrgDeletedError || (error instanceof SluiceError && error.status < 500)) {
          resumeStoring(stopped);
          throw error;
        }
        for (const ws of this.#sockets.of(key)) closeSocket(ws, { reason: 'connection_lost', code: CLOSE_NOT_RECORDED }, 'the change could not be confirmed; connect again');
        throw error;
      }
      for (const ws of this.#sockets.of(key)) closeSocket(ws, ending);
      return result;
    });
  }
}
