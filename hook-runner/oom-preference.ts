// Which process the kernel's out-of-memory killer takes first when a machine or container runs out:
// a process may raise its own /proc/self/oom_score_adj without privilege. The compile process asks
// to go first (a compile killed refuses one module), the runner child next (the runtime restarts it,
// and its job fences make that safe), so the runtime, which nothing but a supervisor restarts and
// whose mapped data file can make it look the largest, goes last.

import { readFileSync, writeFileSync } from 'node:fs';

const ADJUSTMENT_FILE = '/proc/self/oom_score_adj';

/** The compile process's adjustment: the most the kernel allows, first to be killed. */
export const COMPILE_PROCESS_OOM_SCORE = 1000;
/** The runner child's: before the runtime, after its compile process. */
export const RUNNER_CHILD_OOM_SCORE = 500;

/**
 * Raises this process's adjustment to `score`, never lowers it (lowering needs privilege, and a
 * supervisor may have set more). Where /proc has no such file (not Linux) nothing changes.
 */
export function volunteerForOomKill(score: number): void {
  try {
    if (Number(readFileSync(ADJUSTMENT_FILE, 'utf8')) >= score) return;
    writeFileSync(ADJUSTMENT_FILE, String(score));
  } catch {
    // Not Linux, or /proc read-only: the kernel's own choice stands.
  }
}

/** This process's adjustment now, or undefined where there is none. */
export function oomScoreAdjustment(pid: number | 'self' = 'self'): number | undefined {
  try {
    return Number(readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8'));
  } catch {
    return undefined;
  }
}
