// Gives a hook-runner back a module it lost (its data dir is new or was wiped, or the runtime now
// points at another runner) or holds damaged: an Invoke answered `module_not_found` or
// `module_corrupt` (its stored bytes no longer hash to the digest) sends the bytes the runtime kept
// (custom-action-store.ts) with Compile, the upload's own RPC, which stores them again, then tries
// the Invoke once more.
//
// The second Invoke is the same call (fence, idempotency key): the runner looks the module up before
// it checks the fence or runs anything, so the first one left no trace and the guest runs once.
// A runner that lost its modules lost its secrets too: required-secrets.ts holds back the calls
// that read them.
// Restores are shared per (org, digest): concurrent runs that find the module missing join the one
// under way, and a run whose Invoke was sent before a restore finished skips its own, so a lost
// module costs one transfer of its bytes, not one per run.

import { LRUCache } from 'lru-cache';
import { AccessError, RetryableError, SluiceError, TerminalError } from '../errors.ts';
import type { ActionInvoker, InvokeInput, InvokeResult } from '../hook-runner/client.ts';
import { RunnerUnavailableError } from '../hook-runner/runner-errors.ts';
import { moduleDigest } from './custom-action-record.ts';

/** Where the kept module bytes are read (the custom action store). */
export interface StoredModules {
  moduleBytes(orgId: string, digest: string): Uint8Array | undefined;
}

/** What restoring needs of the hook-runner client. */
export interface RestoringRunner extends ActionInvoker {
  /** Resolves with the digest once the runner has the bytes durably (`restore`: a run waits on them). */
  compile(wasm: Uint8Array, orgId: string, restore: boolean): Promise<string>;
}

export interface RestoreOptions {
  /**
   * Told of each module sent again. A runner that lost its modules lost its secrets vault with them
   * (the runtime never holds secrets): the runtime warns, so an operator knows to set them again.
   */
  readonly onRestored?: (orgId: string, digest: string) => void;
  /** How many (org, module) restores are remembered (RESTORES_REMEMBERED; tests set fewer). */
  readonly remembered?: number;
}

/**
 * Restores remembered, the least recently used let go past it: forgetting one costs at most one
 * more transfer, to a call whose Invoke was sent before that restore finished. Unbounded, a runtime
 * whose runner lost its store now and then kept one entry per module ever restored, deleted orgs'
 * included.
 */
export const RESTORES_REMEMBERED = 10_000;

/** The runner's answer to an Invoke of a digest it does not have, or holds damaged (hook-runner/module-registry.ts). */
const needsModuleAgain = (error: unknown): error is SluiceError => error instanceof SluiceError && (error.code === 'module_not_found' || error.code === 'module_corrupt');

/**
 * The first Invoke reached the runner, so the attempt started, whatever later calls find: an
 * unreachable runner now is "may have run", not "never sent" (custom-action-step.ts).
 */
function afterReached(error: unknown): unknown {
  if (error instanceof RunnerUnavailableError && !error.mayHaveRun) return new RunnerUnavailableError(error.message, true, error.cause);
  return error;
}

/**
 * An invoker that restores a lost module once per call, as the header says. Failures name what to
 * do: no kept bytes (a version uploaded before the runtime kept them) is `module_not_found`, not
 * retried, saying to upload the module again; kept bytes that do not hash to the digest, or a runner
 * that reports another digest, fail closed without running anything; bytes the runner refuses (a
 * rule it holds now refuses the module) are `module_recompile_failed`; a runner that cannot be reached
 * is retryable.
 */
export function createRestoringInvoker(runner: RestoringRunner, modules: StoredModules, options: RestoreOptions = {}): ActionInvoker {
  const underWay = new Map<string, Promise<void>>();
  /** Restores completed per (org, digest), for the modules restored most recently. */
  const completed = new LRUCache<string, number>({ max: options.remembered ?? RESTORES_REMEMBERED });
  const keyOf = (orgId: string, digest: string): string => JSON.stringify([orgId, digest]);

  async function send(orgId: string, digest: string): Promise<void> {
    const bytes = modules.moduleBytes(orgId, digest);
    if (bytes === undefined) {
      throw new AccessError(404, 'module_not_found', `The hook-runner does not have module ${digest} (its data was lost or it is another runner), and this version was uploaded before Sluice kept module bytes, so it cannot be sent again. Upload the action's module again (a new version), approve it, then resume the run.`);
    }
    if (moduleDigest(bytes) !== digest) {
      throw new TerminalError('stored_module_corrupt', `The stored bytes of module ${digest} do not match its digest; nothing was sent to the hook-runner. Upload the action's module again.`);
    }
    let reported: string;
    try {
      reported = await runner.compile(bytes, orgId, true);
    } catch (error) {
      if (error instanceof RetryableError || !(error instanceof SluiceError)) throw error;
      // What the runner answers when a module it kept no longer compiles (module-registry.ts): the
      // same fix, whichever way the runner found out.
      throw new TerminalError('module_recompile_failed', `The hook-runner lost module ${digest} and refused it when it was sent again (${error.code}: ${error.message}); upload a rebuilt module as a new version.`, { cause: error });
    }
    if (reported !== digest) {
      throw new SluiceError(502, 'hook_runner_digest_mismatch', `The hook-runner reported digest ${reported} for module ${digest} when it was sent again; nothing was run.`);
    }
    options.onRestored?.(orgId, digest);
  }

  /** Resolves once the module is back; `seen` is how many restores had completed when the failed Invoke was sent. */
  function restore(orgId: string, digest: string, seen: number): Promise<void> {
    const key = keyOf(orgId, digest);
    if ((completed.get(key) ?? 0) > seen) return Promise.resolve();
    let pending = underWay.get(key);
    if (pending === undefined) {
      // Counted before it leaves `underWay`, so no caller finds neither and sends the bytes again.
      pending = send(orgId, digest)
        .then(() => void completed.set(key, (completed.get(key) ?? 0) + 1))
        .finally(() => underWay.delete(key));
      underWay.set(key, pending);
    }
    return pending;
  }

  return {
    async invoke(input: InvokeInput): Promise<InvokeResult> {
      const seen = completed.get(keyOf(input.orgId, input.digest)) ?? 0;
      try {
        return await runner.invoke(input);
      } catch (error) {
        if (!needsModuleAgain(error)) throw error;
      }
      try {
        await restore(input.orgId, input.digest, seen);
      } catch (error) {
        throw afterReached(error);
      }
      try {
        return await runner.invoke(input);
      } catch (error) {
        if (needsModuleAgain(error)) {
          throw new RetryableError(error.code, `The hook-runner lost module ${input.digest} again just after it was sent again (${error.code}); the step is retried.`, undefined, { cause: error });
        }
        throw afterReached(error);
      }
    },
  };
}
