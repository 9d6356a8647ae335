// The plan rule for the sandbox environment: a starter org may not use it (402 `sandbox_disabled`).
// One function so every API that touches an environment (workflows, events, runs, reset) agrees.

import { AccessError } from '../errors.ts';
import type { Organization, Plan } from './organizations.ts';

/** Plans without a sandbox environment. */
const NO_SANDBOX: ReadonlySet<Plan> = new Set(['starter']);

export const sandboxAllowed = (org: Organization): boolean => !NO_SANDBOX.has(org.plan);

/** Why sandbox work is refused on `plan`. */
export const sandboxDisabledMessage = (plan: Plan): string => `The sandbox environment is not available on the ${plan} plan; upgrade to pro or enterprise to use it.`;

/** Throws 402 `sandbox_disabled` (field `environment`) when `org`'s plan has no sandbox and `environment` is sandbox. */
export function assertSandboxAllowed(org: Organization, environment: string): void {
  if (environment !== 'sandbox' || sandboxAllowed(org)) return;
  throw new AccessError(402, 'sandbox_disabled', sandboxDisabledMessage(org.plan), {
    field: 'environment',
  });
}
