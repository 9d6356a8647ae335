// Which process the kernel's out-of-memory killer takes first when a machine or container runs out:
// a process may raise its own /proc/<pid>/oom_score_adj, or its child's, without privilege. The
// compile process asks to go first (a compile killed refuses one module), the runner the runtime
// spawned next (the runtime restarts it, and its job fences make that safe), so the runtime, which
// nothing but a supervisor restarts and whose mapped data file can make it look the largest, goes
// last. A standalone runner is left as it is: nothing restarts it either.

import { readFileSync, writeFileSync } from 'node:fs';

const adjustmentFile = (pid: number | 'self'): string => `/proc/${pid}/oom_score_adj`;

/** The compile process's adjustment: the most the kernel allows, first to be killed. */
export const COMPILE_PROCESS_OOM_SCORE = 1000;
/** The runner child's: before the runtime, after its compile process. */
export const RUNNER_CHILD_OOM_SCORE = 500;

/**
 * Raises the adjustment of process `pid` (this one by default; the runtime raises its runner
 * child's) to `score`, never lowers it (lowering needs privilege, and a supervisor may have set
 * more). Where /proc has no such file (not Linux), or the process is gone, nothing changes.
 */
export function volunteerForOomKill(score: number, pid: number | 'self' = 'self'): void {
  const current = oomScoreAdjustment(pid);
  if (current === undefined || current >= score) return;
  try {
    writeFileSync(adjustmentFile(pid), String(score));
  } catch {
    // /proc read-only, or the process has exited: the kernel's own choice stands.
  }
}

/** The adjustment of process `pid` (this one by default) now, or undefined where there is none. */
export function oomScoreAdjustment(pid: number | 'self' = 'self'): number | undefined {
  try {
    return Number(readFileSync(adjustmentFile(pid), 'utf8'));
  } catch {
    return undefined;
  }
}
