// What retention lets go (dedup claims, live updates past retention, history past retention) is
// pruned once right after start and then every interval: a runtime restarted more often than the
// interval still prunes. One pass at a time (a slow pass is not started again over itself), each
// job on its own, a failed job counted and logged; close stops the pass in flight after the batch
// each job is writing (a start-up prune of a long backlog would otherwise hold a shutdown for
// seconds) and waits for that, so none runs on into a closed ledger.

export interface PruneLoop {
  /** Runs a pass now (after the one in flight, if any); resolves once it has ended. For tests. */
  passNow(): Promise<void>;
  /** Stops the loop; resolves once the pass in flight (if any) has ended. */
  close(): Promise<void>;
}

/** Starts the loop: `jobs` by name, each told by `stop` to end after its current batch; `onFailure` hears a job that threw or rejected. */
export function startPruneLoop(
  jobs: Readonly<Record<string, (stop: AbortSignal) => Promise<unknown>>>,
  intervalMs: number,
  onFailure: (job: string, error: unknown) => void,
): PruneLoop {
  let inFlight: Promise<void> | undefined;
  let closed = false;
  const stopping = new AbortController();
  const pass = (): void => {
    if (closed || inFlight !== undefined) return;
    const runs = Object.entries(jobs).map(([job, run]) => Promise.resolve(stopping.signal).then(run).catch((error: unknown) => onFailure(job, error)));
    inFlight = Promise.all(runs).then(() => {
      inFlight = undefined;
    });
  };
  const first = setTimeout(pass, 0);
  const every = setInterval(pass, intervalMs);
  first.unref();
  every.unref();
  return {
    async passNow(): Promise<void> {
      await inFlight;
      pass();
      await inFlight;
    },
    async close(): Promise<void> {
      closed = true;
      stopping.abort();
      clearTimeout(first);
      clearInterval(every);
      await inFlight;
    },
  };
}
