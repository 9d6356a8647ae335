// Holds back a custom action call whose secrets the hook-runner lost. The runtime keeps the names
// (never the values) of the secrets set through it (secret-names.ts); a runner whose data is new or
// was wiped has lost its vault, and a vault skips a missing key, so a guest would run as if its
// secrets were never set. Every call therefore names the secrets it reads that were set through
// this runtime, and the runner refuses it, before running or recording anything, when its vault
// lacks one: the attempt never started, is retried, and the message says which keys to set again.

import { SluiceError } from '../errors.ts';
import type { ActionInvoker, InvokeInput, InvokeResult } from '../hook-runner/client.ts';
import { CallNotSentError } from '../hook-runner/runner-errors.ts';
import { secretKeysOf } from './permissions.ts';

/** The secret names set per action (secret-names.ts). */
export interface KnownSecrets {
  of(orgId: string, actionId: string): string[];
}

/** An invoker that names, on every call, the secrets the runner must hold for it (see the header). */
export function createSecretRequiringInvoker(inner: ActionInvoker, secretNames: KnownSecrets): ActionInvoker {
  return {
    async invoke(call: InvokeInput): Promise<InvokeResult> {
      try {
        return await inner.invoke(withRequiredSecrets(call, secretNames));
      } catch (error) {
        if (!(error instanceof SluiceError) || error.code !== 'secrets_missing_on_runner') throw error;
        throw new CallNotSentError(
          'secrets_missing_on_runner',
          `${error.message} Set them again (POST /organizations/${call.orgId}/custom-actions/${call.actionId}/secrets), or send again a DELETE of them that was not confirmed (a 503); the step is retried, and a run out of retries can be resumed.`,
        );
      }
    },
  };
}

/** The call, naming the secrets its permissions read that were set through this runtime. */
function withRequiredSecrets(input: InvokeInput, secretNames: KnownSecrets): InvokeInput {
  // A simulation reads no secret.
  if (input.simulate === true) return input;
  const permitted = secretKeysOf(input.permissions);
  if (permitted.length === 0) return input;
  const set = new Set(secretNames.of(input.orgId, input.actionId));
  const requiredSecretKeys = permitted.filter((key) => set.has(key));
  return requiredSecretKeys.length === 0 ? input : { ...input, requiredSecretKeys };
}
