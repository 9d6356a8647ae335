// The seven RPCs as plain async functions over typed wire messages: parse, act on the registry,
// vault and ledger, answer. Transport concerns (auth, status mapping, binding) live in server.ts.
import { createHash } from 'node:crypto';
import { createGuestEnvelope } from './envelope.ts';
import type { Execution, InvocationLedger } from './invocation-ledger.ts';
import { createInvocationResult, toInvokeReply } from './invocation-outcome.ts';
import type { ModuleRegistry } from './module-registry.ts';
import { maskSecrets } from './output-secrets.ts';
import {
  parseCompileRequest, parseDeleteSecretRequest, parseForgetOrgRequest, parseInvokeRequest, parsePutSecretRequest, parseSecretScope, type InvokeCommand,
} from './requests.ts';
import type { ForgottenOrgs } from './forgotten-orgs.ts';
import { InvokeAbandonedError, OrganizationForgottenError, SecretsMissingError } from './runner-error.ts';
import { runModule } from './sandbox-run.ts';
import type { TenantTurns } from './tenant-turns.ts';
import type { SecretVault } from './vault.ts';
import type { HookRunnerMethodName, HookRunnerMethods } from './wire.ts';

/** What a handler may ask of its call besides the request. */
export interface CallState {
  /** Whether the caller has gone: the call was cancelled or its deadline passed. */
  readonly gaveUp: () => boolean;
}

export type HookRunnerHandlers = {
  readonly [M in HookRunnerMethodName]: (request: HookRunnerMethods[M]['request'], call?: CallState) => Promise<HookRunnerMethods[M]['reply']>;
};

export interface HookRunnerHandlerDeps {
  readonly modules: ModuleRegistry;
  readonly vault: SecretVault;
  readonly ledger: InvocationLedger;
  /** Deleted orgs (ForgetOrg): their calls are refused. */
  readonly forgotten: ForgottenOrgs;
  /** The guest slots, taken by orgs in turn. */
  readonly limiter: TenantTurns;
  readonly version: string;
  /** Whether guests can run (the addon loaded and its engine started); Health reports it as `ok`. */
  readonly sandboxReady: () => boolean;
  readonly startedAtMs: number;
  readonly now: () => number;
  /** Throws DiskFullError below the disk floor: called before anything that writes runs. */
  readonly assertWritable: () => void;
  /** Whether the disk is below the floor now (assertWritable would throw); Health reports it as `disk_low`. */
  readonly diskLow: () => boolean;
  /** Whether the last pass pruning old records failed; Health reports it as `prune_failing`. */
  readonly pruneFailing: () => boolean;
}

/** The secrets a guest is given, with the inputs label they amount to (invocationInputs), when the call is recorded. */
interface GuestSecrets {
  readonly values: Readonly<Record<string, string>>;
  readonly inputs?: string;
}

const NO_SECRETS: GuestSecrets = { values: {} };

/**
 * The guest's run, given how to read its secrets. Its module is loaded when it runs, not before: a call the
 * ledger answers from its record needs none (the module may be gone from this runner, or refused by
 * this release's sandbox). `wanted` is asked when the module's compile and the guest's slot come: a
 * call nobody waits for any more is dropped there (InvokeAbandonedError), so that under a backlog the
 * slots go to calls whose answers are awaited. The secrets are read when the slot comes, not when the
 * call arrived (it may wait many seconds behind other calls): a secret deleted or replaced meanwhile,
 * its write answered, never reaches the guest, and the record names the secrets it did get.
 */
function createExecution(deps: HookRunnerHandlerDeps, command: InvokeCommand, secrets: () => GuestSecrets): Execution {
  return async (wanted: () => boolean) => {
    const compiled = await deps.modules.get(command.digest, command.scope.orgId, () => !wanted());
    let read = NO_SECRETS;
    const outcome = await deps.limiter.run(command.scope.orgId, () => {
      if (!wanted()) return Promise.reject(new InvokeAbandonedError());
      read = secrets();
      const envelope = createGuestEnvelope({
        payloadJson: command.payloadJson,
        secrets: read.values,
        permissions: command.permissions,
        actionId: command.scope.actionId,
        digest: command.digest,
      });
      return runModule(compiled, envelope);
    });
    const result = await maskSecrets(createInvocationResult(outcome), read.values);
    return read.inputs === undefined ? result : { ...result, ranWith: read.inputs };
  };
}

export function createHookRunnerHandlers(deps: HookRunnerHandlerDeps): HookRunnerHandlers {
  return {
    async Compile(request, call) {
      const { bytes, tenant, restore } = parseCompileRequest(request);
      if (deps.forgotten.has(tenant)) throw new OrganizationForgottenError();
      // Before the compile, and again before its bytes are written (it may wait its turn for seconds).
      deps.assertWritable();
      return { digest: await deps.modules.compile(bytes, call?.gaveUp, { tenant, first: restore }, deps.assertWritable) };
    },

    async Invoke(request, call) {
      const command = parseInvokeRequest(request);
      if (deps.forgotten.has(command.scope.orgId)) throw new OrganizationForgottenError();
      // A module this runner lacks is asked for first (the runtime sends it back), before anything else is checked.
      deps.modules.assertStored(command.digest);
      await deps.modules.noteUse(command.digest, command.scope.orgId, () => !deps.diskLow());
      const { mode } = command;
      const gaveUp = call?.gaveUp ?? (() => false);
      if (mode.kind === 'simulate') return toInvokeReply(await createExecution(deps, command, () => NO_SECRETS)(() => !gaveUp()), false);
      assertSecretsHeld(deps.vault, command);
      const inputsNow = (): string => invocationInputs(command.permissions, deps.vault.revision(command.scope, command.secretKeys));
      // Before the guest runs: a run whose record could not be written would be run again.
      deps.assertWritable();
      const answer = await deps.ledger.run(
        {
          orgId: command.scope.orgId,
          actionId: command.scope.actionId,
          digest: command.digest,
          inputs: inputsNow(),
          idempotencyKey: mode.idempotencyKey,
          runId: mode.runId,
          fence: mode.fence,
        },
        // Secrets are decrypted only when the guest actually runs, never for a replay.
        createExecution(deps, command, () => ({ values: deps.vault.readMany(command.scope, command.secretKeys), inputs: inputsNow() })),
        // A recorded call is still wanted while any caller of its key waits on it (a retry joined it): the ledger asks them all.
        gaveUp,
      );
      return toInvokeReply(answer.result, answer.replayed);
    },

    async PutSecret(request) {
      const { scope, key, value } = parsePutSecretRequest(request);
      deps.assertWritable();
      await deps.vault.put(scope, key, value);
      return {};
    },

    async ListSecretKeys(request) {
      return { keys: deps.vault.listKeys(parseSecretScope(request)) };
    },

    async DeleteSecret(request) {
      const { scope, key } = parseDeleteSecretRequest(request);
      // A secret it does not hold is not there, disk or no disk: nothing to refuse.
      if (!deps.vault.listKeys(scope).includes(key)) return { deleted: false };
      deps.assertWritable();
      return { deleted: await deps.vault.delete(scope, key) };
    },

    async ForgetOrg(request) {
      const orgId = parseForgetOrgRequest(request);
      // Its mark and removals write pages too (the runtime asks again later); one done writes nothing.
      if (!deps.forgotten.done(orgId)) deps.assertWritable();
      return { records_removed: String(await deps.forgotten.forget(orgId, deps.now())) };
    },

    async Health() {
      return { ok: deps.sandboxReady(), version: deps.version, uptime_ms: String(Math.max(0, deps.now() - deps.startedAtMs)), disk_low: deps.diskLow(), prune_failing: deps.pruneFailing() };
    },
  };
}

/** Refuses, before anything runs or is recorded, a call whose required secrets the vault lost. */
function assertSecretsHeld(vault: SecretVault, command: InvokeCommand): void {
  if (command.requiredSecretKeys.length === 0) return;
  const held = new Set(vault.listKeys(command.scope));
  const missing = command.requiredSecretKeys.filter((key) => !held.has(key));
  if (missing.length > 0) throw new SecretsMissingError(missing);
}

/** The guest's inputs besides its module and payload, as one value: its permissions (sorted) and its secrets' revision. */
export function invocationInputs(permissions: readonly string[], secretsRevision: string): string {
  return createHash('sha256').update(JSON.stringify([[...permissions].sort(), secretsRevision])).digest('base64url');
}
