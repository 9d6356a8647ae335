// The open-file limit fan-out needs (one descriptor per socket, on both sides): read from this process,
// which every child inherits, and raised with prlimit(1) when it is too low and the process may raise it.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface OpenFileLimit {
  readonly soft: number;
  readonly hard: number;
  readonly sufficient: boolean;
  /** One line for the report: the limit, what was needed, and what was done about it. */
  readonly note: string;
}

/** Descriptors beyond the sockets: LMDB, the listen socket, pipes, the control port, tsx's files. */
export const OPEN_FILES_HEADROOM = 256;

/**
 * Makes sure this process (and every child started afterwards) may hold `needed` descriptors. Node
 * raises its own soft limit to the hard one at start-up, so the hard limit is what counts; raising
 * that needs CAP_SYS_RESOURCE (root in most containers, not in every one).
 */
export function ensureOpenFiles(needed: number): OpenFileLimit {
  const before = readLimit();
  if (before.soft >= needed) return { ...before, sufficient: true, note: `open files: ${needed.toLocaleString('en-US')} needed per process, limit ${before.soft.toLocaleString('en-US')} (soft) / ${before.hard.toLocaleString('en-US')} (hard): enough` };
  let why = '';
  try {
    const target = Math.max(needed, before.hard);
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${target}:${target}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    why = error instanceof Error && 'stderr' in error ? String((error as { stderr: unknown }).stderr).trim() : String(error);
  }
  const after = readLimit();
  const sufficient = after.soft >= needed;
  const action = sufficient ? `raised from ${before.soft} to ${after.soft} with prlimit` : `raising it failed (${why || 'no change'}); run \`ulimit -n 65536\` as root before the bench`;
  return { ...after, sufficient, note: `open files: ${needed.toLocaleString('en-US')} needed per process, limit was ${before.soft.toLocaleString('en-US')} / ${before.hard.toLocaleString('en-US')}: ${action}` };
}

function readLimit(): { soft: number; hard: number } {
  const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files')) ?? '';
  const [soft, hard] = line.replace('Max open files', '').trim().split(/\s+/).map((v) => (v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v)));
  return { soft: soft ?? 0, hard: hard ?? 0 };
}
