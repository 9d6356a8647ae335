// Entry of the hook-runner's compile process (compile-process.ts starts it): admits and compiles one
// module at a time into an artifact its runner loads, so that the runner can kill a compile that runs
// past its deadline or grows past its memory cap. It opens no store and holds no secrets; it watches
// the memory each compile adds (the compile runs on a libuv thread, this thread stays free to watch),
// asks to be retired when earlier compiles left it large (so no module is judged by another's
// leftovers), and exits when its runner goes.
import { compileArtifact, SandboxCompileError } from './sandbox.ts';
import type { CompileReply, CompileRequest } from './compile-process.ts';
import { COMPILE_PROCESS_OOM_SCORE, volunteerForOomKill } from './oom-preference.ts';

// A compile near its cap in a small container should be what the kernel kills, not the runtime.
volunteerForOomKill(COMPILE_PROCESS_OOM_SCORE);

const MEMORY_CHECK_MS = 20;
const maxMemoryBytes = Number(process.argv[2]);

/** Resident size when the compile under way began; undefined while idle. */
let baseline: number | undefined;

const send = (reply: CompileReply, then?: () => void): void => {
  process.send?.(reply, undefined, undefined, then);
};

// Not process.exit: it waits for the libuv thread still compiling, minutes at worst.
const die = (): void => void process.kill(process.pid, 'SIGKILL');

/** Kept past half the cap after a compile: the runner starts the next compile in a fresh process. */
const retire = (): boolean => process.memoryUsage.rss() > maxMemoryBytes / 2;

process.on('message', (request: CompileRequest) => {
  baseline = process.memoryUsage.rss();
  compileArtifact(request.bytes, { stored: request.stored }).then(
    (artifact) => {
      baseline = undefined;
      send({ kind: 'compiled', id: request.id, code: artifact.code, hasStart: artifact.hasStart, retire: retire() });
    },
    (error: unknown) => {
      baseline = undefined;
      send(error instanceof SandboxCompileError
        ? { kind: 'refused', id: request.id, code: error.code, reason: error.reason, retire: retire() }
        : { kind: 'failed', id: request.id, message: error instanceof Error ? error.message : String(error) });
    },
  );
});

// The runner stopped or died: nothing is left to compile for.
process.on('disconnect', die);

setInterval(() => {
  if (baseline === undefined || !Number.isFinite(maxMemoryBytes)) return;
  const grown = process.memoryUsage.rss() - baseline;
  if (grown > maxMemoryBytes) send({ kind: 'memory', rss: grown }, die);
}, MEMORY_CHECK_MS);

send({ kind: 'ready' });
