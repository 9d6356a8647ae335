// `sluice hook-runner`: runs the hook-runner in this process when UV_THREADPOOL_SIZE was set at start,
// else re-executes it once with the pool sized for the machine (libuv reads the size only at start).

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runHookRunnerCommand } from '../../hook-runner/command.ts';
import { chooseThreadPoolSize } from '../../hook-runner/thread-pool.ts';

const ENTRY = fileURLToPath(new URL('../../hook-runner/main.ts', import.meta.url));

export async function runStandaloneHookRunner(args: readonly string[]): Promise<void> {
  if (process.env.UV_THREADPOOL_SIZE !== undefined) return runHookRunnerCommand(args, process.env);
  const child = spawn(process.execPath, [...process.execArgv, ENTRY, ...args], {
    stdio: 'inherit',
    env: { ...process.env, UV_THREADPOOL_SIZE: String(chooseThreadPoolSize()) },
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => child.kill(signal));
  const code = await new Promise<number>((resolve) => child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal === null ? 1 : 128))));
  process.exitCode = code;
}
