// Finds Debian's redis-server for the BullMQ peer; when it is missing and the bench may install
// (root, no --no-install), installs it with apt-get, the same way the ingest scenario gets wrk.

import { spawnSync } from 'node:child_process';
import { ensureDebianTool, type ToolAvailability } from '../../harness/debian-tool.ts';

function hasRedis(): boolean {
  const run = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return run.error === undefined && run.status === 0;
}

export function redisVersion(): string {
  return spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? 'unknown';
}

/** Debian starts the packaged service on install; the bench runs its own instance and leaves that one alone. */
export function ensureRedis(installMissing: boolean, log: (line: string) => void): ToolAvailability {
  return ensureDebianTool({ command: 'redis-server', installArgs: ['--no-install-recommends', 'redis-server'], present: hasRedis }, installMissing, log);
}
