// How many payload bytes the steps being performed may hold at once: a total, and a share of it per
// tenant. A webhook step builds its body from the event's whole payload and a custom action ships
// it to the hook-runner; with large events and slow receivers those copies (several per payload
// byte: the text, the body, its buffer, the signed string) outgrew the heap, and a restart then
// dispatched every recovered run at once and died again. A step whose payload does not fit waits:
// in order within its tenant, and tenants take turns, so one tenant's large, slow steps (holding
// their share while they wait for a connection) never hold back another tenant's. A step that fits
// its tenant's share and waits only for the total is next: no other tenant's step takes from the
// total before it (busy tenants' small steps, each fitting the bytes just freed, kept a larger one
// waiting for as long as they kept coming). The accounting is tenant-byte-shares.ts, as for
// request bodies.

import { getHeapStatistics } from 'node:v8';
import { FifoQueue } from '../../actors/fifo-queue.ts';
import { TenantByteShares } from '../tenancy/tenant-byte-shares.ts';

/** The default: a sixteenth of V8's heap limit (about 259 MiB with Node's default heap here), at least 16 MiB. */
export function defaultStepInputBytes(): number {
  return Math.max(16 * 1024 * 1024, Math.floor(getHeapStatistics().heap_size_limit / 16));
}

/** What a step's payload counts: against its tenant's share (at most the share), and against the total (at most the total). */
interface Cost {
  readonly share: number;
  readonly overall: number;
}

interface Waiter {
  readonly cost: Cost;
  readonly grant: (taken: boolean) => void;
  /** Withdrawn while it waited: skipped (and dropped) when it comes to its queue's head. */
  withdrawn: boolean;
}

export class StepInputBudget {
  readonly #perTenant: number;
  readonly #total: number;
  readonly #shares: TenantByteShares;
  /** Each tenant's waiting steps, oldest first; only tenants with some. */
  readonly #waiting = new Map<string, FifoQueue<Waiter>>();
  /** Tenants with waiting steps, in the order they are served. */
  readonly #turns = new FifoQueue<string>();
  #waiters = 0;

  /** `perTenant` defaults to an eighth of the total. */
  constructor(totalBytes: number, perTenant = Math.max(1, Math.floor(totalBytes / 8))) {
    if (!(totalBytes >= 1)) throw new RangeError(`the step input budget must be at least 1 byte, got ${totalBytes}`);
    this.#perTenant = Math.min(perTenant, totalBytes);
    this.#total = totalBytes;
    this.#shares = new TenantByteShares(totalBytes, this.#perTenant);
  }

  /** Bytes taken now; steps waiting. For metrics and tests. */
  stats(): { readonly heldBytes: number; readonly waiting: number } {
    return { heldBytes: this.#shares.held, waiting: this.#waiters };
  }

  /**
   * Takes `bytes` for `tenant` now when they fit (the total and the tenant's share) and none of the
   * tenant's steps waits before this one; false (nothing taken) otherwise. A payload larger than the
   * share takes all of it, so it runs alone among its tenant's, and counts its whole size against
   * the total (at most the total: a payload larger than that runs alone).
   */
  tryTake(tenant: string, bytes: number): boolean {
    const cost = this.#cost(bytes);
    if (this.#waiting.has(tenant) || !this.#fits(tenant, cost) || this.#someoneWaitsForTotal()) return false;
    this.#shares.hold(tenant, cost.share, cost.overall);
    return true;
  }

  /**
   * Resolves true once `bytes` are taken for `tenant`, after the tenant's steps that waited before;
   * false, with nothing taken, when `withdrawn` aborts first (the step is no longer wanted): it
   * leaves the queue then, and the steps behind it may go on.
   */
  take(tenant: string, bytes: number, withdrawn?: AbortSignal): Promise<boolean> {
    if (this.tryTake(tenant, bytes)) return Promise.resolve(true);
    if (withdrawn?.aborted === true) return Promise.resolve(false);
    return new Promise((grant) => {
      let queue = this.#waiting.get(tenant);
      if (queue === undefined) {
        queue = new FifoQueue<Waiter>();
        this.#waiting.set(tenant, queue);
        this.#turns.push(tenant);
      }
      const onWithdrawn = (): void => {
        waiter.withdrawn = true;
        this.#waiters -= 1;
        grant(false);
        this.#serve();
      };
      const waiter: Waiter = {
        cost: this.#cost(bytes),
        grant: (taken) => {
          withdrawn?.removeEventListener('abort', onWithdrawn);
          grant(taken);
        },
        withdrawn: false,
      };
      withdrawn?.addEventListener('abort', onWithdrawn, { once: true });
      queue.push(waiter);
      this.#waiters += 1;
    });
  }

  /** Gives back what a `take` or a successful `tryTake` of `bytes` for `tenant` took, and lets waiters in. */
  release(tenant: string, bytes: number): void {
    const cost = this.#cost(bytes);
    this.#shares.give(tenant, cost.share, cost.overall);
    this.#serve();
  }

  /**
   * One pass over the tenants waiting, in turn: each grants what fits of its queue's head. A head
   * that fits its share but not the total ends the pass and keeps its tenant's turn first.
   */
  #serve(): void {
    for (let turns = this.#turns.size; turns > 0; turns -= 1) {
      const tenant = this.#turns.peek() as string;
      const queue = this.#waiting.get(tenant) as FifoQueue<Waiter>;
      for (let head = headOf(queue); head !== undefined && this.#fits(tenant, head.cost); head = headOf(queue)) {
        queue.shift();
        this.#waiters -= 1;
        this.#shares.hold(tenant, head.cost.share, head.cost.overall);
        head.grant(true);
      }
      const head = headOf(queue);
      if (head !== undefined && this.#fitsShare(tenant, head.cost)) return;
      this.#turns.shift();
      if (queue.size > 0) this.#turns.push(tenant);
      else this.#waiting.delete(tenant);
    }
  }

  /** Whether a tenant's oldest waiting step fits its share, so that it waits for the total alone. */
  #someoneWaitsForTotal(): boolean {
    for (const [tenant, queue] of this.#waiting) {
      const head = headOf(queue);
      if (head !== undefined && this.#fitsShare(tenant, head.cost)) return true;
    }
    return false;
  }

  #fits(tenant: string, cost: Cost): boolean {
    return this.#shares.fits(tenant, cost.share, cost.overall);
  }

  /** Whether the cost fits the tenant's share, whatever the total holds. */
  #fitsShare(tenant: string, cost: Cost): boolean {
    return this.#shares.fits(tenant, cost.share, 0);
  }

  #cost(bytes: number): Cost {
    const size = Math.max(0, bytes);
    return { share: Math.min(size, this.#perTenant), overall: Math.min(size, this.#total) };
  }
}

/** The queue's oldest waiter not withdrawn, dropping the withdrawn ones before it. */
function headOf(queue: FifoQueue<Waiter>): Waiter | undefined {
  while (queue.peek()?.withdrawn === true) queue.shift();
  return queue.peek();
}
