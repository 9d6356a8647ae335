// Sockets one org may hold open to its receivers at once, busy or idle, over all of them. Each
// receiver origin has its own cap (--webhook-connections), and busy sockets are mostly bounded by
// the org's runs in flight; but a cancelled run's request stays out until its receiver answers or
// its timeout passes (the answer is kept as after_cancel), so an org cancelling runs that post to
// many origins (a wildcard DNS name gives any number) held ever more sockets, until the process ran
// out of file descriptors and every org's next connection failed (sluice_out_of_file_descriptors).
// Past its share, an org's next new connection waits for one of its own sockets to close.

import { KeyedCounts } from '../../actors/keyed-counts.ts';

/** Sockets one org may hold open to receivers at once, over all of them. */
export const OUTBOUND_SOCKETS_PER_ORG = 1024;

interface Waiting {
  /** False once the request was dropped (withdrawn, failed, the pools closed): it is skipped. */
  readonly wanted: () => boolean;
  readonly connect: () => void;
  readonly request: object;
}

export class OrgSocketShare {
  readonly #perOrg: number;
  readonly #open = new KeyedCounts();
  /** Per org, requests waiting for room, oldest first. */
  readonly #waiting = new Map<string, Waiting[]>();
  /** Every waiting request, for isWaiting (asked of every request sent). */
  readonly #waitingRequests = new Set<object>();

  constructor(perOrg = OUTBOUND_SOCKETS_PER_ORG) {
    this.#perOrg = perOrg;
  }

  /** Whether `org` may open one more socket now. */
  hasRoom(org: string): boolean {
    return this.#open.get(org) < this.#perOrg;
  }

  /** `request` of `org` connects (`connect`) once the org has room, after those waiting before it. */
  wait(org: string, request: object, wanted: () => boolean, connect: () => void): void {
    const queue = this.#waiting.get(org);
    if (queue === undefined) this.#waiting.set(org, [{ request, wanted, connect }]);
    else queue.push({ request, wanted, connect });
    this.#waitingRequests.add(request);
  }

  /** Whether requests of `org` wait for room (a socket of its own that falls idle closes for them). */
  hasWaiting(org: string): boolean {
    return (this.#waiting.get(org)?.length ?? 0) > 0;
  }

  isWaiting(request: object): boolean {
    return this.#waitingRequests.has(request);
  }

  /** Requests waiting for room, over every org. */
  get waiting(): number {
    return this.#waitingRequests.size;
  }

  opened(org: string): void {
    this.#open.add(org);
  }

  /** One of the org's sockets closed: the oldest requests still wanted connect while there is room. */
  closed(org: string): void {
    this.#open.subtract(org);
    const queue = this.#waiting.get(org);
    while (queue !== undefined && queue.length > 0 && this.hasRoom(org)) {
      const next = queue.shift() as Waiting;
      this.#waitingRequests.delete(next.request);
      if (next.wanted()) next.connect();
    }
    if (queue?.length === 0) this.#waiting.delete(org);
  }

  /** Drops `request` from its org's queue, if it waits there (withdrawn: it will never connect). */
  forget(org: string, request: object): void {
    if (!this.#waitingRequests.delete(request)) return;
    const queue = this.#waiting.get(org) ?? [];
    const at = queue.findIndex((waiting) => waiting.request === request);
    if (at !== -1) queue.splice(at, 1);
    if (queue.length === 0) this.#waiting.delete(org);
  }

  /** Forgets every waiting request (the pools are closing: each is failed by its own shutdown). */
  clear(): void {
    this.#waiting.clear();
    this.#waitingRequests.clear();
  }
}
