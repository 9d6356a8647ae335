// `sluice hook-runner`: runs the hook-runner in this process when UV_THREADPOOL_SIZE was set at start,
// else re-executes it once with the pool sized for the machine (libuv reads the size only at start).

import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { runHookRunnerCommand } from '../../hook-runner/command.ts';
import { chooseThreadPoolSize } from '../../hook-runner/thread-pool.ts';

const ENTRY = fileURLToPath(new URL('../../hook-runner/main.ts', import.meta.url));

export async function runStandaloneHookRunner(args: readonly string[]): Promise<void> {
  if (process.env.UV_THREADPOOL_SIZE !== undefined) return runHookRunnerCommand(args, process.env);
  const child = spawn(process.execPath, [...process.execArgv, ENTRY, ...args], {
    // The IPC channel carries no messages: its closing tells the runner this process is gone, even
    // by SIGKILL, so it never outlives the command an operator killed (holding the port).
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, UV_THREADPOOL_SIZE: String(chooseThreadPoolSize()) },
  });
  let forwarded: NodeJS.Signals | undefined;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      forwarded ??= signal;
      child.kill(signal);
    });
  }
  // The runner ignores a stop signal while it drains; one that ends it anyway came before its
  // handlers were installed or after it had closed (a terminal's Ctrl-C reaches it twice, the second
  // late): either way it stopped as asked.
  const code = await new Promise<number>((resolve) =>
    child.once('exit', (exitCode, signal) => {
      if (exitCode !== null) return resolve(exitCode);
      if (signal === null || signal === forwarded) return resolve(signal === null ? 1 : 0);
      // Killed by something else (the OOM killer, kill -9, a crash): said, and exited as a shell
      // reports such a death, 128 + the signal's number.
      process.stderr.write(`hook-runner: the runner process was killed by ${signal}\n`);
      resolve(128 + (osConstants.signals[signal] ?? 0));
    }),
  );
  process.exitCode = code;
}
