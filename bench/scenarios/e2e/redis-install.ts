// Finds Debian's redis-server for the BullMQ peer; when it is missing and the bench may install
// (root, no --no-install), installs it with apt-get, the same way the ingest scenario gets wrk.

import { spawnSync } from 'node:child_process';

const INSTALL_BOUND_MS = 300_000;

export interface RedisAvailability {
  readonly available: boolean;
  readonly note: string;
}

function hasRedis(): boolean {
  const run = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return run.error === undefined && run.status === 0;
}

export function redisVersion(): string {
  return spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? 'unknown';
}

export function ensureRedis(installMissing: boolean, log: (line: string) => void): RedisAvailability {
  if (hasRedis()) return { available: true, note: 'redis-server found on PATH' };
  if (!installMissing) return { available: false, note: 'redis-server not installed and installing was disabled (--no-install)' };
  if (process.getuid?.() !== 0) return { available: false, note: 'redis-server not installed and not root, so apt-get cannot install it' };
  log('redis-server not found: installing it with apt-get (apt-get update, then apt-get install -y redis-server)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update', '-qq'], ['install', '-y', '-qq', '--no-install-recommends', 'redis-server']]) {
    const run = spawnSync('apt-get', args, { env, stdio: ['ignore', 'ignore', 'pipe'], timeout: INSTALL_BOUND_MS });
    if (run.status !== 0) {
      return { available: false, note: `apt-get ${args[0] ?? ''} failed: ${run.stderr?.toString().trim().slice(-300) ?? run.error?.message ?? ''}` };
    }
  }
  // Debian starts the packaged service on install; the bench runs its own instance and leaves that one alone.
  return hasRedis() ? { available: true, note: 'redis-server installed by the bench with apt-get' } : { available: false, note: 'apt-get reported success but redis-server is still missing' };
}
