// Tools the bench needs from Debian (wrk, redis-server): found on PATH, or installed with apt-get
// when the bench may install (root, no --no-install). The caller says how to tell the tool is there.

import { spawnSync } from 'node:child_process';

const INSTALL_BOUND_MS = 300_000;

export interface ToolAvailability {
  readonly available: boolean;
  readonly note: string;
}

export interface DebianTool {
  /** The command, as named in notes. */
  readonly command: string;
  /** `apt-get install` arguments after `-y -qq`: flags, then the package. */
  readonly installArgs: readonly string[];
  /** Whether the tool can be run now. */
  readonly present: () => boolean;
}

export function ensureDebianTool(tool: DebianTool, installMissing: boolean, log: (line: string) => void): ToolAvailability {
  const { command } = tool;
  if (tool.present()) return { available: true, note: `${command} found on PATH` };
  if (!installMissing) return { available: false, note: `${command} not installed and installing was disabled (--no-install)` };
  if (process.getuid?.() !== 0) return { available: false, note: `${command} not installed and not root, so apt-get cannot install it` };
  log(`${command} not found: installing it with apt-get (apt-get update, then apt-get install -y ${tool.installArgs.join(' ')})`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update', '-qq'], ['install', '-y', '-qq', ...tool.installArgs]]) {
    const run = spawnSync('apt-get', args, { env, stdio: ['ignore', 'ignore', 'pipe'], timeout: INSTALL_BOUND_MS });
    if (run.status !== 0) {
      return { available: false, note: `apt-get ${args[0] ?? ''} failed: ${run.stderr?.toString().trim().slice(-300) ?? run.error?.message ?? ''}` };
    }
  }
  return tool.present()
    ? { available: true, note: `${command} installed by the bench with apt-get` }
    : { available: false, note: `apt-get reported success but ${command} is still missing` };
}
