// The guest slots, shared among tenants in turn. Guests run on a few libuv threads; a queue in
// arrival order let one org with many slow invocations (each up to its fuel) hold every other
// org's calls behind all of its own. Waiting calls queue per org, and a freed slot goes to the
// next org in turn, so another org's call waits for at most one call of each org ahead of it.

export interface TenantTurns {
  /** Runs `task` for `tenant` when a slot is free and it is the tenant's turn. */
  run<T>(tenant: string, task: () => Promise<T>): Promise<T>;
  readonly active: number;
  readonly queued: number;
}

export function createTenantTurns(slots: number): TenantTurns {
  let active = 0;
  let queued = 0;
  /** Each tenant's waiting calls, oldest first; only tenants with some. */
  const waiting = new Map<string, Array<() => void>>();
  /** Tenants with waiting calls, in the order they are served. */
  const turns: string[] = [];
  const release = (): void => {
    const tenant = turns.shift();
    if (tenant === undefined) {
      active -= 1;
      return;
    }
    const queue = waiting.get(tenant) as Array<() => void>;
    const next = queue.shift() as () => void;
    if (queue.length > 0) turns.push(tenant);
    else waiting.delete(tenant);
    queued -= 1;
    next();
  };
  return {
    async run<T>(tenant: string, task: () => Promise<T>): Promise<T> {
      if (active < slots) active += 1;
      else {
        await new Promise<void>((resolve) => {
          const queue = waiting.get(tenant);
          if (queue === undefined) {
            waiting.set(tenant, [resolve]);
            turns.push(tenant);
          } else queue.push(resolve);
          queued += 1;
        });
      }
      try {
        return await task();
      } finally {
        release();
      }
    },
    get active() {
      return active;
    },
    get queued() {
      return queued;
    },
  };
}
