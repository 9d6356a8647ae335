// Standalone entry of the hook-runner process (`node --import tsx hook-runner/main.ts --listen …`),
// used when the runtime spawns it as a child; the CLI calls runHookRunnerCommand directly.
import { chooseThreadPoolSize } from './thread-pool.ts';

// libuv sizes its pool once, when the pool first starts. Measured on Node 20: under ESM (and tsx)
// the module loader has already started it before this line runs, so only a value present in the
// environment at process start takes effect (runtime/hook-runner/child.ts sets it). Setting it here
// still helps any loader that does not touch the pool first, and children inherit it. The command is
// told the inherited value, which is the one libuv actually used, to size its sandbox slots honestly.
const inheritedPoolSize = process.env['UV_THREADPOOL_SIZE'];
if (inheritedPoolSize === undefined) process.env['UV_THREADPOOL_SIZE'] = String(chooseThreadPoolSize());

const { runHookRunnerCommand } = await import('./command.ts');
const { RunnerConfigError } = await import('./runner-error.ts');
const { DataDirInUseError } = await import('./dir-lock.ts');
const { DiskFullError } = await import('./disk-full.ts');

try {
  await runHookRunnerCommand(process.argv.slice(2), { ...process.env, UV_THREADPOOL_SIZE: inheritedPoolSize });
  // An IPC channel from the parent would keep the event loop alive after a clean stop.
  if (process.connected) process.disconnect();
} catch (error) {
  if (!(error instanceof RunnerConfigError) && !(error instanceof DataDirInUseError) && !(error instanceof DiskFullError)) throw error;
  process.stderr.write(`hook-runner: ${error.message}\n`);
  // A store held by another runner may be free soon (the one before it still draining), and a full
  // disk may get space: exit 1, which the runtime's supervisor restarts after its backoff; 2 says no
  // restart can help.
  process.exitCode = error instanceof RunnerConfigError ? 2 : 1;
  if (process.connected) process.disconnect();
}
