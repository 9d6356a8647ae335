// Faults injected into a child process's libc calls with libfiu (Debian's fiu-utils): `fiu-run`
// starts a command with libfiu's preload libraries, and `fiu-ctrl` turns a failure point on in the
// running process by its pid, through fifos named after a prefix. Used here to make fdatasync fail
// with EIO, as it does on a disk whose write-back failed; everything else runs for real.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The words that start a command under libfiu (its POSIX failure points), its control fifos named `<prefix>-<pid>`. */
export const underFaultInjection = (prefix: string): string[] => ['fiu-run', '-x', '-f', prefix];

/**
 * The program and arguments that run Node with `nodeArgs`, through `launcher` when one is given
 * (underFaultInjection's words exec Node, so the child's pid stays Node's).
 */
export const nodeThrough = (launcher: readonly string[], nodeArgs: readonly string[]): [string, string[]] =>
  launcher.length === 0 ? [process.execPath, [...nodeArgs]] : [launcher[0]!, [...launcher.slice(1), process.execPath, ...nodeArgs]];

/** Says what to install when libfiu's tools are missing (`.ci/run` installs them). */
export async function assertFaultInjectionInstalled(): Promise<void> {
  await run('fiu-ctrl', ['-h']).catch((error: NodeJS.ErrnoException) => {
    // fiu-ctrl -h prints its usage and exits 1; only a missing command matters here.
    if (error.code === 'ENOENT') throw new Error('this test injects disk faults with libfiu: apt-get install fiu-utils');
  });
}

/** From now on, every fdatasync of process `pid` (started under underFaultInjection(prefix)) fails with EIO. */
export async function failSyncs(prefix: string, pid: number): Promise<void> {
  await run('fiu-ctrl', ['-f', prefix, '-c', 'enable name=posix/io/sync/fdatasync,failinfo=5', String(pid)]);
}
