// Long main-thread work cut into slices of about a millisecond, with a turn of the event loop
// between them: other calls (other tenants' invocations, health checks) are served in between
// instead of waiting for the whole of it. Masking secrets in a 256 KiB output against 100 secrets
// is ~300 substring scans; run in one go it held the runner for 150-300 ms per call.

import { setImmediate as nextTurn } from 'node:timers/promises';

/** How long a slice may run before the work yields. */
export const SLICE_MS = 1;

export class WorkSlices {
  #since: number;

  constructor(private readonly now: () => number = () => performance.now()) {
    this.#since = now();
  }

  /** Whether the current slice has run its time: the caller should `await yield()` before more work. */
  due(): boolean {
    return this.now() - this.#since >= SLICE_MS;
  }

  /** Lets the event loop turn, then starts a new slice. */
  async yield(): Promise<void> {
    await nextTurn();
    this.#since = this.now();
  }
}
