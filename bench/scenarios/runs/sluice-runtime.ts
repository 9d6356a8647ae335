// `sluice serve` for the run scenarios: started through the harness (own process group, stopped at the
// end), with its CPU time read from /proc and a SIGKILL of its process group for the crash scenario.

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ServerChild } from '../../harness/children.ts';
import type { ScenarioContext } from '../../scenario.ts';
import { cpuProfileArgs } from '../../harness/cpu-profile.ts';
import { withDefaults } from '../../../test/helpers/default-args.ts';

export interface SluiceRuntime {
  readonly baseUrl: string;
  readonly port: number;
  readonly adminToken: string;
  readonly dataDir: string;
  /** CPU seconds (user + system) the runtime process has used so far, from /proc; undefined elsewhere. */
  cpuSeconds(): number | undefined;
  /** kill -9 of the runtime's process group; resolves once the process is gone. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the runtime on `dataDir` (a fresh one when omitted); the same admin token works across restarts. */
export async function startSluice(context: ScenarioContext, options: { dataDir?: string; adminToken?: string; label?: string; args?: readonly string[] } = {}): Promise<SluiceRuntime> {
  const dataDir = options.dataDir ?? context.tempDirs.make('sluice');
  const adminToken = options.adminToken ?? randomBytes(24).toString('hex');
  const server: ServerChild = await context.children.startServer({
    name: options.label ?? 'sluice serve',
    command: process.execPath,
    args: [...cpuProfileArgs(), '--import', 'tsx', join('runtime', 'cli.ts'), 'serve', ...withDefaults(['--port', '0', '--data-dir', dataDir, '--admin-token', adminToken, '--log-level', 'warn', '--webhook-targets', 'any'], options.args)],
    cwd: context.repoRoot,
    timeoutMs: 120_000,
  });
  return {
    baseUrl: server.baseUrl,
    port: server.port,
    adminToken,
    dataDir,
    cpuSeconds: () => processCpuSeconds(server.pid),
    kill: () => server.kill(),
    stop: () => server.stop(),
  };
}

/** utime + stime (fields 14 and 15 of /proc/<pid>/stat, in clock ticks of 1/100 s on Linux). */
function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}
