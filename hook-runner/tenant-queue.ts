// Waiters queued per tenant, served with tenants taking turns: the next waiter is the oldest of
// the tenant whose turn it is, and a tenant with more goes to the back of the turns. One tenant's
// many waiters never stand between another tenant's one and a freed slot for longer than one turn
// of each tenant ahead (tenant-turns.ts for guests, thread-pool.ts for compiles).

export class TenantQueue<T> {
  /** Each tenant's waiters, oldest first; only tenants with some. */
  readonly #waiting = new Map<string, T[]>();
  /** Tenants with waiters, in the order they are served. */
  readonly #turns: string[] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(tenant: string, item: T): void {
    const queue = this.#waiting.get(tenant);
    if (queue === undefined) {
      this.#waiting.set(tenant, [item]);
      this.#turns.push(tenant);
    } else queue.push(item);
    this.#size += 1;
  }

  /** The oldest waiter of the tenant whose turn it is, removed; undefined when none waits. */
  shift(): T | undefined {
    const tenant = this.#turns.shift();
    if (tenant === undefined) return undefined;
    const queue = this.#waiting.get(tenant) as T[];
    const item = queue.shift();
    if (queue.length > 0) this.#turns.push(tenant);
    else this.#waiting.delete(tenant);
    this.#size -= 1;
    return item;
  }
}
