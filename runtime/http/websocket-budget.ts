// How many WebSockets (live rooms and device sockets together) the process holds open at once.
// Each holds a file descriptor: without a total, sockets (one org's up to its own cap, or many
// orgs') could take the descriptors that HTTP requests, webhook deliveries and the ledger need,
// and every tenant would fail at once instead of the next upgrade being refused. One org holds at
// most three quarters of the total, its live and device sockets together: each kind has its own cap
// (half the total), so without this one org could hold every socket, half of each kind; with it
// other orgs keep a quarter, and a lone tenant still has most of the process.

import { KeyedCounts } from '../../actors/keyed-counts.ts';
import { RetryableError, SluiceError } from '../errors.ts';
import { sharedFiles } from '../open-file-limit.ts';

/** The total when the open-file limit cannot be read (not Linux) or is unlimited. */
export const WEBSOCKETS_FALLBACK = 50_000;

/**
 * Three quarters of this process's open-file limit (Node raises its soft limit to the hard one at
 * start) less what it holds whatever its load (open-file-limit.ts), the rest left for HTTP
 * connections, webhook deliveries and files.
 */
export function defaultWebSocketLimit(limit: number | undefined): number {
  return limit === undefined ? WEBSOCKETS_FALLBACK : Math.max(1, Math.floor((sharedFiles(limit) * 3) / 4));
}

export class WebSocketBudget {
  readonly total: number;
  /** What one org may hold open, live and device sockets together. */
  readonly perOrg: number;
  #open = 0;
  readonly #openPerOrg = new KeyedCounts();

  constructor(total: number) {
    this.total = total;
    this.perOrg = Math.max(1, Math.floor((total * 3) / 4));
  }

  /** WebSockets open now. */
  get open(): number {
    return this.#open;
  }

  /**
   * Throws 503 `too_many_websockets` when the total is open, 429 `too_many_org_websockets` when
   * `orgId` holds its share (not for a socket `replacing` one of the org's, whose count comes back
   * once the older closes); call in an upgrade, before `opened`. The total holds for every socket:
   * it keeps file descriptors for the rest of the process. True when admitted past the share.
   */
  assertRoom(orgId: string, replacing = false): boolean {
    if (this.#open >= this.total) {
      throw new RetryableError('too_many_websockets', `This server holds as many WebSockets open as it may (${this.total}); connect again later.`, 5000);
    }
    const atShare = this.#openPerOrg.get(orgId) >= this.perOrg;
    if (atShare && replacing) return true;
    if (atShare) {
      throw new SluiceError(429, 'too_many_org_websockets', `An organization may hold at most ${this.perOrg} WebSockets open at once, live and device sockets together; close one first.`);
    }
    return false;
  }

  opened(orgId: string): void {
    this.#open += 1;
    this.#openPerOrg.add(orgId);
  }

  closed(orgId: string): void {
    this.#open -= 1;
    this.#openPerOrg.subtract(orgId);
  }
}
