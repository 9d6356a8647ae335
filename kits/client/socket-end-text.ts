// Why a socket ended, as one sentence for a log or a status line: what the live subscription's and
// the device connection's `onDisconnect` hear before they reconnect.

import { plainHttpAdvice } from './plain-http-hint.ts';
import type { SocketEnd } from './socket-run.ts';

/** `what`: the far end as the sentence names it ("the live room"); `given`: the url the client was given (its hint names that one, not the ws:// url opened from it). */
export function describeSocketEnd(end: SocketEnd, given: URL, what: string): string {
  switch (end.kind) {
    case 'unreachable': {
      const hint = end.hint === undefined ? '' : `; ${plainHttpAdvice(given)}`;
      if (end.timedOutMs !== undefined) return `${what} did not answer within ${end.timedOutMs} ms${hint}`;
      return `${end.cause === undefined ? `${what} could not be reached` : `${what} could not be reached (${end.cause})`}${hint}`;
    }
    case 'refused':
      return `${what} refused the connection (${end.status})`;
    case 'closed':
      return `the connection closed (${end.code}${end.reason === '' ? '' : `: ${end.reason}`})`;
  }
}
