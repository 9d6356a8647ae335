// How many WebSockets (live rooms and device sockets together) the process holds open at once.
// Each holds a file descriptor: without a total, sockets (one org's up to its own cap, or many
// orgs') could take the descriptors that HTTP requests, webhook deliveries and the ledger need,
// and every tenant would fail at once instead of the next upgrade being refused.

import { readFileSync } from 'node:fs';
import { RetryableError } from '../errors.ts';

/** The total when the open-file limit cannot be read (not Linux) or is unlimited. */
export const WEBSOCKETS_FALLBACK = 50_000;

/**
 * Three quarters of this process's open-file limit (Node raises its soft limit to the hard one at
 * start), the rest left for HTTP connections, webhook deliveries and files.
 */
export function defaultWebSocketLimit(limits = readProcLimits()): number {
  const soft = /^Max open files\s+(\d+)/m.exec(limits ?? '')?.[1];
  return soft === undefined ? WEBSOCKETS_FALLBACK : Math.max(1, Math.floor((Number(soft) * 3) / 4));
}

function readProcLimits(): string | undefined {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
}

export class WebSocketBudget {
  readonly total: number;
  #open = 0;

  constructor(total: number) {
    this.total = total;
  }

  /** WebSockets open now. */
  get open(): number {
    return this.#open;
  }

  /** Throws 503 `too_many_websockets` when the total is open; call in an upgrade, before `opened`. */
  assertRoom(): void {
    if (this.#open >= this.total) {
      throw new RetryableError('too_many_websockets', `This server holds as many WebSockets open as it may (${this.total}); connect again later.`, 5000);
    }
  }

  opened(): void {
    this.#open += 1;
  }

  closed(): void {
    this.#open -= 1;
  }
}
