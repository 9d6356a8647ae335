// Entry of the hook-runner's compile process (compile-process.ts starts it): admits and compiles one
// module at a time into an artifact its runner loads, so that the runner can kill a compile that runs
// past its deadline or grows past its memory cap. It opens no store and holds no secrets; it reports
// its own memory (the compile runs on a libuv thread, this thread stays free to watch) and exits when
// its runner goes.
import { compileArtifact, SandboxCompileError } from './sandbox.ts';
import type { CompileReply, CompileRequest } from './compile-process.ts';

const MEMORY_CHECK_MS = 20;
const maxMemoryBytes = Number(process.argv[2]);

const send = (reply: CompileReply, then?: () => void): void => {
  process.send?.(reply, undefined, undefined, then);
};

process.on('message', (request: CompileRequest) => {
  compileArtifact(request.bytes).then(
    (artifact) => send({ kind: 'compiled', id: request.id, code: artifact.code, hasStart: artifact.hasStart }),
    (error: unknown) =>
      send(error instanceof SandboxCompileError
        ? { kind: 'refused', id: request.id, code: error.code, reason: error.reason }
        : { kind: 'failed', id: request.id, message: error instanceof Error ? error.message : String(error) }),
  );
});

// Not process.exit: it waits for the libuv thread still compiling, minutes at worst.
const die = (): void => void process.kill(process.pid, 'SIGKILL');

// The runner stopped or died: nothing is left to compile for.
process.on('disconnect', die);

setInterval(() => {
  const rss = process.memoryUsage.rss();
  if (Number.isFinite(maxMemoryBytes) && rss > maxMemoryBytes) send({ kind: 'memory', rss }, die);
}, MEMORY_CHECK_MS);

send({ kind: 'ready' });
