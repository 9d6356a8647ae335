// A fixed number of slots in front of work that must not all run at once (compiles on their
// thread, guests on theirs). A task runs at once when a slot is free; otherwise it waits in a queue
// whose policy decides who goes next when a slot frees up (thread-pool.ts, tenant-turns.ts).

/** Who waits, and in what order they get a freed slot. */
export interface WaitQueue<K> {
  push(key: K, resume: () => void): void;
  /** The next waiter to resume, removed from the queue; undefined when none waits. */
  next(): (() => void) | undefined;
  readonly size: number;
}

export interface SlotGate<K> {
  /** Runs `task` (queued under `key` while every slot is taken); its slot is freed however it ends. */
  run<T>(key: K, task: () => Promise<T>): Promise<T>;
  readonly active: number;
  readonly queued: number;
}

export function createSlotGate<K>(slots: number, queue: WaitQueue<K>): SlotGate<K> {
  let active = 0;
  const release = (): void => {
    const next = queue.next();
    if (next === undefined) active -= 1;
    else next();
  };
  return {
    async run<T>(key: K, task: () => Promise<T>): Promise<T> {
      if (active < slots) active += 1;
      else await new Promise<void>((resolve) => queue.push(key, resolve));
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
      return queue.size;
    },
  };
}
