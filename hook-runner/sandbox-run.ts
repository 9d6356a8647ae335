// Runs admitted modules under the DESIGN 6.5 limits, inline on the event loop when a run fits a
// small fuel slice and on the libuv thread pool otherwise; both paths give the same outcome.
import {
  SANDBOX_LIMITS,
  TRAP_KINDS,
  addon,
  hostFailure,
  nativeHandleOf,
  type CompiledModule,
  type NativeAddon,
  type NativeHandle,
  type NativeOutcome,
  type SandboxOutcome,
  type SandboxRunLimits,
} from './sandbox.ts';

function checkLimits(limits: Partial<SandboxRunLimits>): Partial<SandboxRunLimits> {
  const clamped: { -readonly [K in keyof SandboxRunLimits]?: number } = {};
  for (const key of ['fuel', 'maxMemoryBytes', 'maxOutputBytes'] as const) {
    const value = limits[key];
    if (value === undefined) continue;
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`sandbox limit ${key} must be a non-negative integer, got ${String(value)}`);
    }
    clamped[key] = Math.min(value, SANDBOX_LIMITS[key]);
  }
  return clamped;
}

function decodeOutcome(native: NativeOutcome): SandboxOutcome {
  const fuelUsed = native.fuelUsed;
  switch (native.kind) {
    case 'output':
      return { kind: 'output', output: native.output ?? '', fuelUsed };
    case 'rejected':
      return { kind: 'rejected', fuelUsed };
    default: {
      const trap = TRAP_KINDS.find((kind) => kind === native.trap) ?? 'other';
      return { kind: 'trap', trap, message: native.message ?? `unknown sandbox outcome ${native.kind}`, fuelUsed };
    }
  }
}

/**
 * Fuel for the inline attempt of runModule, which runs on the event loop and blocks it. Measured
 * on the 2-core dev VM: an endless `(loop (br 0))` burns 500,000 units in ~0.23 ms (1,000,000 in
 * ~0.45 ms), so the block stays well under a millisecond for ordinary code, while the reference
 * order-risk-scorer needs ~85,000 units for the README's sample order and fits with room to spare.
 */
export const INLINE_FUEL_SLICE = 500_000;

/**
 * Fuel counts instructions, not time: a guest built to miss the cache on every load (a pointer
 * chase through 10 MiB) was measured at ~5.5 ms for the same 500,000 units. An inline run longer
 * than this budget is an overrun.
 */
export const INLINE_TIME_BUDGET_MS = 1;

/**
 * A module goes to the pool for good at its INLINE_OVERRUNS_ALLOWED-th overrun within its last
 * INLINE_OVERRUN_WINDOW inline runs. One slow run proves little (a preempted thread, a page fault,
 * cold caches): measured here, a 9 us guest sent to the pool by one such run paid 50-90 us on
 * every later call. A guest slow by design reaches the count within its first runs. The window,
 * not a lifetime ratio, is what bounds a hostile guest: it can overrun at most twice in any 100
 * inline runs, so it never blocks the event loop more than three runs in a row or on more than
 * 2 % of its runs, however many cheap runs came before.
 */
export const INLINE_OVERRUNS_ALLOWED = 3;
export const INLINE_OVERRUN_WINDOW = 100;

/** A module's inline runs so far, and which of the recent ones overran (their run numbers). */
export interface InlineHistory {
  readonly runs: number;
  readonly recentOverruns: readonly number[];
}

export const NO_INLINE_HISTORY: InlineHistory = { runs: 0, recentOverruns: [] };

const ranOutOfFuel = (outcome: SandboxOutcome): boolean => outcome.kind === 'trap' && outcome.trap === 'out_of_fuel';

/**
 * Records one inline attempt: running out of the slice sends a module to the pool at once (it
 * would every time); overrunning the time budget does only as INLINE_OVERRUNS_ALLOWED says.
 */
export function afterInlineRun(history: InlineHistory, inline: SandboxOutcome, elapsedMs: number): { history: InlineHistory; toThreadPool: boolean } {
  const runs = history.runs + 1;
  const recent = history.recentOverruns.filter((run) => run > runs - INLINE_OVERRUN_WINDOW);
  const recentOverruns = elapsedMs > INLINE_TIME_BUDGET_MS ? [...recent, runs] : recent;
  return { history: { runs, recentOverruns }, toThreadPool: ranOutOfFuel(inline) || recentOverruns.length >= INLINE_OVERRUNS_ALLOWED };
}

/**
 * Modules whose later runs go straight to the thread pool (see afterInlineRun), so a
 * known-expensive module does not pay for a doomed inline attempt or block the loop on every call.
 * Sticky while the module lives; it dies with its CompiledModule (the registry's LRU evicts and
 * recompiles), which starts it over.
 */
const needsThreadPool = new WeakSet<CompiledModule>();
const inlineHistories = new WeakMap<CompiledModule, InlineHistory>();

function handleOf(module: CompiledModule, inputJson: string, caller: string): NativeHandle {
  const handle = nativeHandleOf(module);
  if (handle === undefined) throw new TypeError(`${caller} expects a CompiledModule from compileModule`);
  if (typeof inputJson !== 'string') throw new TypeError(`${caller} expects the input JSON as a string`);
  return handle;
}

function runInline(native: NativeAddon, handle: NativeHandle, inputJson: string, limits: Partial<SandboxRunLimits>): SandboxOutcome {
  try {
    return decodeOutcome(native.runInline(handle, inputJson, limits));
  } catch (error) {
    throw hostFailure(error);
  }
}

async function runOnThreadPool(native: NativeAddon, handle: NativeHandle, inputJson: string, limits: Partial<SandboxRunLimits>): Promise<SandboxOutcome> {
  let outcome: NativeOutcome;
  try {
    outcome = await native.run(handle, inputJson, limits);
  } catch (error) {
    throw hostFailure(error);
  }
  return decodeOutcome(outcome);
}

/**
 * Runs `execute` on a fresh instance. Two paths, one result:
 *
 * - inline: on the calling thread (the event loop), with fuel min(limit, INLINE_FUEL_SLICE). Most
 *   actions finish here and skip the libuv round trip (10-66 us on a small VM).
 * - thread pool: when the inline run traps `out_of_fuel` and the caller allowed more fuel, the run
 *   starts over on the libuv thread pool with the caller's full limits (concurrent runs beyond
 *   UV_THREADPOOL_SIZE queue there), and that outcome is the answer. Modules that did this once,
 *   or keep overrunning the inline time budget, skip the inline attempt (see afterInlineRun).
 *
 * Starting over is safe because a guest has no imports at all (DESIGN 6.5): a run is a pure,
 * deterministic function of module, input and limits, with nothing observable outside its fresh
 * store. The inline attempt had the same limits except fuel, and the guest cannot read its fuel,
 * so a run that ended within the slice ended exactly as it would have with the full limit (same
 * kind, output, trap and fuelUsed), and a run that ran out is simply repeated in full.
 *
 * Guest misbehaviour resolves as a `trap` outcome; the promise rejects only with
 * SandboxUnavailableError (host failure).
 */
export async function runModule(
  module: CompiledModule,
  inputJson: string,
  limits: Partial<SandboxRunLimits> = {},
): Promise<SandboxOutcome> {
  const handle = handleOf(module, inputJson, 'runModule');
  const checked = checkLimits(limits);
  const native = addon();
  const fuel = checked.fuel ?? SANDBOX_LIMITS.fuel;
  if (fuel <= INLINE_FUEL_SLICE) return runInline(native, handle, inputJson, checked);
  if (!needsThreadPool.has(module)) {
    const started = performance.now();
    const inline = runInline(native, handle, inputJson, { ...checked, fuel: INLINE_FUEL_SLICE });
    const { history, toThreadPool } = afterInlineRun(inlineHistories.get(module) ?? NO_INLINE_HISTORY, inline, performance.now() - started);
    if (toThreadPool) needsThreadPool.add(module);
    else inlineHistories.set(module, history);
    if (!ranOutOfFuel(inline)) return inline;
  }
  return runOnThreadPool(native, handle, inputJson, checked);
}

/**
 * runModule's thread-pool path alone (what every run did before the inline path): the same
 * outcome, never on the event loop. For comparisons, such as tests proving the two paths agree.
 */
export async function runModuleOnThreadPool(
  module: CompiledModule,
  inputJson: string,
  limits: Partial<SandboxRunLimits> = {},
): Promise<SandboxOutcome> {
  const handle = handleOf(module, inputJson, 'runModuleOnThreadPool');
  return runOnThreadPool(addon(), handle, inputJson, checkLimits(limits));
}
