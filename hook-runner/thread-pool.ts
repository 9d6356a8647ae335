// Sizing of the libuv thread pool, which runs the Wasmtime addon (guest runs and compiles) and
// lmdb-js's commits and fsyncs, and the limiter that queues compiles for their thread, tenants
// taking turns (guests take their slots in tenant turns too: tenant-turns.ts), so neither takes
// every thread from LMDB and one tenant's compiles do not hold another's back.
import { availableParallelism } from 'node:os';
import { createSlotGate } from './slot-gate.ts';
import { TenantQueue } from './tenant-queue.ts';

const LIBUV_DEFAULT_POOL_SIZE = 4;
const LIBUV_MAX_POOL_SIZE = 1024;
/** Threads left to lmdb-js (write transaction + flush) and fs while guests run. */
const RESERVED_THREADS = 2;

/**
 * Compiles at once (module-registry.ts queues them): each runs in the compile process
 * (compile-process.ts), then loading its result takes a thread here; not counted as guest slots.
 */
export const COMPILE_THREADS = 1;

/** One thread per core for guests plus the compile thread and the reserve, at least libuv's default, at most 64. */
export const chooseThreadPoolSize = (parallelism: number = availableParallelism()): number =>
  Math.min(64, Math.max(LIBUV_DEFAULT_POOL_SIZE, parallelism + COMPILE_THREADS + RESERVED_THREADS));

/**
 * The pool size libuv actually uses: it reads UV_THREADPOOL_SIZE once, when the pool first starts.
 * Under ESM (and tsx) the loader starts the pool before any user code runs, so this must be the
 * value from the environment the process was *started* with (child.ts sets it for the runner).
 */
export function parseThreadPoolSize(value: string | undefined): number {
  const parsed = value === undefined ? Number.NaN : Number.parseInt(value, 10);
  if (!Number.isInteger(parsed) || parsed < 1) return LIBUV_DEFAULT_POOL_SIZE;
  return Math.min(parsed, LIBUV_MAX_POOL_SIZE);
}

export const sandboxSlotsFor = (poolSize: number): number => Math.max(1, poolSize - RESERVED_THREADS - COMPILE_THREADS);

export interface RunLimiter {
  /**
   * Runs `task` when a slot is free; tasks wait per tenant, tenants taking turns (tenant-queue.ts),
   * those marked `first` before other waiting ones (the compile a waiting Invoke needs goes before
   * uploads queued earlier), but never more than FIRST_IN_A_ROW of them while another task waits,
   * so a steady stream of `first` tasks cannot hold the others back for ever.
   */
  run<T>(task: () => Promise<T>, first?: boolean, tenant?: string): Promise<T>;
  readonly active: number;
  readonly queued: number;
}

/** `first` tasks started one after another while other tasks wait, before one of those goes. */
export const FIRST_IN_A_ROW = 4;

export function createRunLimiter(slots: number): RunLimiter {
  const waiting = new TenantQueue<() => void>();
  const waitingFirst = new TenantQueue<() => void>();
  let firstInARow = 0;
  const gate = createSlotGate<{ readonly first: boolean; readonly tenant: string }>(slots, {
    push: ({ first, tenant }, resume) => (first ? waitingFirst : waiting).push(tenant, resume),
    next: () => {
      const takeFirst = waitingFirst.size > 0 && (waiting.size === 0 || firstInARow < FIRST_IN_A_ROW);
      firstInARow = takeFirst ? firstInARow + 1 : 0;
      return takeFirst ? waitingFirst.shift() : waiting.shift();
    },
    get size() {
      return waiting.size + waitingFirst.size;
    },
  });
  return {
    run: (task, first = false, tenant = '') => gate.run({ first, tenant }, task),
    get active() {
      return gate.active;
    },
    get queued() {
      return gate.queued;
    },
  };
}
