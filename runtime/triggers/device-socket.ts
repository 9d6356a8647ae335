// What Sluice keeps on each device WebSocket (uWS user data): the device and connection it
// belongs to, whether its connection is recorded, its messages being stored, and how it ends; the
// two ways to talk to it that are safe after it closed (uWS throws on a closed socket); and how a
// change that ends connections first stops its sockets storing (or lets them go on).

import type { WebSocket } from 'uWebSockets.js';
import { CLOSE_NOT_RECORDED } from './device-frame.ts';
import type { DeviceConnection, DeviceHead } from './device-record.ts';
import type { Ending } from './device-store.ts';

export interface SocketData {
  /** The device (no schemas) as it was when its token was checked; the ledger refuses the connection if it changed since. */
  readonly device: DeviceHead;
  /** Its `connected_at_ms` is stamped again when it is recorded (device-connection.ts recordConnection says why). */
  connection: DeviceConnection;
  /** Resolves true once `device.connected` is durable; false when it was not recorded (the socket is closed). */
  ready: Promise<boolean>;
  readonly inFlight: Set<Promise<void>>;
  open: boolean;
  /** Whether a message may still be stored: false once something is about to end this connection. */
  accepting: boolean;
  /** Its `device.connected` is durable (its messages no longer wait for the device's chain). */
  recorded: boolean;
  /** Its connection write was tried: the ledger may hold it even if the write failed (a failed flush). */
  attempted: boolean;
  /** Set when Sluice closes the socket (why, for its `device.disconnected`), and when it has closed (how). */
  ending: Ending | undefined;
  /** Admitted past its org's share to replace the device's open socket, until its connection is recorded or it closes (DeviceSocketTable). */
  pastShare: boolean;
}

/** Sends a text frame to the device unless its socket has closed. */
export function sendFrame(data: SocketData, ws: WebSocket<SocketData>, frame: string): void {
  if (data.open) ws.send(frame, false);
}

/** Closes the socket with the ending's code (1011 when it has none), remembering why, unless it has closed already. */
export function closeSocket(ws: WebSocket<SocketData>, ending: Ending & { readonly code: number | null }, text: string = ending.reason): void {
  const data = ws.getUserData();
  if (!data.open) return;
  data.ending = ending;
  ws.end(ending.code ?? CLOSE_NOT_RECORDED, text);
}

/**
 * The recorded sockets among `sockets` stop storing, and their messages being stored settle;
 * resolves with those sockets. A socket not recorded yet is skipped: its connection is written
 * later in the device's chain, and its messages wait for that (waiting for them here would never end).
 */
export async function quiesce(sockets: Iterable<WebSocket<SocketData>>): Promise<Array<WebSocket<SocketData>>> {
  const stopped = [...sockets].filter((ws) => ws.getUserData().recorded);
  for (const ws of stopped) ws.getUserData().accepting = false;
  await Promise.allSettled(stopped.flatMap((ws) => [...ws.getUserData().inFlight]));
  return stopped;
}

/** The sockets `quiesce` stopped go on storing (those still open), after a change refused before it wrote anything. */
export function resumeStoring(sockets: Iterable<WebSocket<SocketData>>): void {
  for (const ws of sockets) ws.getUserData().accepting = ws.getUserData().open;
}
