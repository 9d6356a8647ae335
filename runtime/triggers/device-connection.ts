// A device connection's two writes, each run in its device's turn (device-sockets.ts): its
// `device.connected` when its socket opens, and its `device.disconnected` once its messages settle.

import type { WebSocket } from 'uWebSockets.js';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import type { EventWriteTurn } from '../events/event-write-turns.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { refusedForDeletion, type DeletingOrgIds } from '../ledger/org-fence.ts';
import { CLOSE_DEVICE_DELETED, CLOSE_NOT_RECORDED, CLOSE_REPLACED, CLOSE_SANDBOX_DISABLED, CLOSE_TOKEN_ROTATED, readyFrame } from './device-frame.ts';
import type { DeviceMessageDeps } from './device-messages.ts';
import { CONNECTED_EVENT_TYPE, connectedEventId, DISCONNECTED_EVENT_TYPE, type DeviceHead } from './device-record.ts';
import { closeSocket, quiesce, resumeStoring, sendFrame, type SocketData } from './device-socket.ts';
import { deviceKeyOf, type DeviceSocketTable } from './device-socket-table.ts';
import type { Ending } from './device-store.ts';

/** Events a connection writes, charged to the ingest quota when it is admitted: its device.connected and its device.disconnected. */
export const EVENTS_PER_CONNECTION = 2;

/** How a sandbox device's socket ends when its org's plan no longer has a sandbox. */
export const SANDBOX_DISABLED = { reason: 'sandbox_disabled', code: CLOSE_SANDBOX_DISABLED } as const;

/** What the two writes need of the sockets' dependencies. */
export type DeviceConnectionDeps = Pick<DeviceMessageDeps, 'devices' | 'orgs' | 'quota' | 'writeTurns' | 'clock' | 'logger'> & {
  /** An ending the fence refused while the org's deletion mark was written is written again should the mark fail. */
  readonly deletedOrgs?: DeletingOrgIds;
};

/** Whether the org exists and its plan has no sandbox (any more). */
export function sandboxDisallowed(orgs: OrganizationStore, orgId: string): boolean {
  const org = orgs.get(orgId);
  return org !== undefined && !sandboxAllowed(org);
}

/**
 * Records the connection, after the device's other sockets stopped storing (a connection the
 * ledger holds open ends first: `replaced` when it is one of them), then greets the device and
 * closes the others (4409). False when it was not recorded (the socket is closed).
 */
export async function recordConnection(d: DeviceConnectionDeps, sockets: DeviceSocketTable, ws: WebSocket<SocketData>, data: SocketData): Promise<boolean> {
  const { device } = data;
  // Never recorded, so neither of its events will be written: the quota they took goes back.
  const unrecorded = (): false => {
    d.quota.refund(device.org_id, EVENTS_PER_CONNECTION);
    return false;
  };
  if (!data.open) return unrecorded();
  // Admitted before its org's plan lost the sandbox, and opened after that plan change looked for sockets.
  if (device.environment === 'sandbox' && sandboxDisallowed(d.orgs, device.org_id)) {
    closeSocket(ws, SANDBOX_DISABLED);
    return unrecorded();
  }
  const key = deviceKeyOf(data);
  const others = await quiesce(sockets.of(key).filter((other) => other !== ws));
  let recorded: boolean;
  // In its turn (after any sandbox reset, within the budget of runs built): it writes its
  // `device.connected`, and the `device.disconnected` of a connection it replaces.
  let turn: EventWriteTurn | undefined;
  try {
    turn = await d.writeTurns.take(device.org_id, device.environment, CONNECTED_EVENT_TYPE, DISCONNECTED_EVENT_TYPE);
    // Stamped now, once the others stopped storing, not at the upgrade: the connection it replaces
    // ends (and this one begins) after every message that one stored, which may have gone on
    // while this connect waited its turn in the device's queue.
    const connection = (data.connection = { ...data.connection, connected_at_ms: d.clock.now() });
    data.attempted = true;
    recorded = await d.devices.connect(device, connection, (open) => sockets.endingOf(key, open, { reason: 'replaced', code: CLOSE_REPLACED }));
  } catch (error) {
    logFailure(d.logger, 'device connection could not be recorded', { org_id: device.org_id, device: device.name }, error);
    // Refused below the disk floor: nothing was written, so only this socket closes; the others go on storing.
    if (error instanceof DiskSpaceLowError) {
      data.attempted = false;
      closeSocket(ws, { reason: 'connection_lost', code: CLOSE_NOT_RECORDED }, 'could not record the connection: the server\'s disk is nearly full; connect again later');
      resumeStoring(others);
      return unrecorded();
    }
    // It may have committed (a failed flush): the others may be ended in the ledger, so they close too.
    for (const socket of [ws, ...others]) closeSocket(socket, { reason: 'connection_lost', code: CLOSE_NOT_RECORDED }, 'could not record the connection; connect again');
    return false;
  } finally {
    turn?.release();
  }
  if (!recorded) {
    // Deleted, or its token rotated, since the upgrade. Sockets of the same stale device close as
    // this one does; the others (opened with the current token) go on storing.
    const current = d.devices.head(device.org_id, device.name);
    const stale = (other: DeviceHead): boolean => current === undefined || other.id !== current.id || other.token_hash !== current.token_hash;
    const ending = current?.id !== device.id ? { reason: 'device_deleted', code: CLOSE_DEVICE_DELETED } as const : { reason: 'token_rotated', code: CLOSE_TOKEN_ROTATED } as const;
    closeSocket(ws, ending);
    for (const other of others) {
      if (stale(other.getUserData().device)) closeSocket(other, ending);
      else other.getUserData().accepting = true;
    }
    return unrecorded();
  }
  data.recorded = true;
  for (const other of others) closeSocket(other, { reason: 'replaced', code: CLOSE_REPLACED }, 'replaced by a newer connection of this device');
  sendFrame(data, ws, readyFrame(device.name, data.connection.id, connectedEventId(device, data.connection)));
  return true;
}

/**
 * Writes the connection's ending as of `at` (when the socket closed), once its messages are
 * settled (each event before `device.disconnected`); false when the write failed.
 */
export async function recordEnding(d: DeviceConnectionDeps, data: SocketData, ending: Ending, at: number): Promise<boolean> {
  await data.ready;
  // Not tried: nothing to end. Tried (recorded or not): the store ends it only if the ledger holds it.
  if (!data.attempted) return true;
  await Promise.allSettled([...data.inFlight]);
  let turn: EventWriteTurn | undefined;
  try {
    // A sandbox reset ends its devices' connections without events, a few per write: a sandbox
    // connection's ending waits it out in its turn, as the device's messages do (then finds it ended).
    turn = await d.writeTurns.take(data.device.org_id, data.device.environment, DISCONNECTED_EVENT_TYPE);
    // A socket that closed while its connect waited was stamped after it closed: it ends as it begins.
    await d.devices.disconnect(data.device, data.connection, ending, Math.max(at, data.connection.connected_at_ms));
    return true;
  } catch (error) {
    // The org was deleted: its records go, this connection's with them.
    if (await refusedForDeletion(error, d.deletedOrgs)) return true;
    // The ledger still holds the connection open: tried again after a pause; meanwhile the
    // device's next connection ends it, and a stop leaves it to the next start (runtime_restarted).
    logFailure(d.logger, 'device disconnection could not be recorded', { org_id: data.device.org_id, device: data.device.name }, error);
    return false;
  } finally {
    turn?.release();
  }
}
