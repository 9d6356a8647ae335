// A dry run of a custom action version: invoked by the hook-runner without approval, without secrets
// and without any record, then checked against the output contract exactly as a run step would be.

import { REJECTION_HINT, trapHint } from './guest-failure-hint.ts';
import { randomBytes } from 'node:crypto';
import { RawJson } from '../validation/raw-json.ts';
import type { ActionInvoker } from '../hook-runner/client.ts';
import { OutputContractError, parseActionOutput } from './output-contract.ts';
import { nestsDeeperThan } from '../validation/json-nesting.ts';

export type ContractCheck = { readonly ok: true } | { readonly ok: false; readonly field: string; readonly message: string };

export interface SimulationView {
  readonly outcome: 'output' | 'rejected' | 'trap';
  /**
   * The output document exactly as the action wrote it (answered with rawJson: long integers stay
   * as written); null when the action rejected, trapped or wrote something that is not JSON (or nests too deep).
   */
  readonly output: RawJson | null;
  /** Why the action rejected the payload (outcome `rejected`). */
  readonly reason?: string;
  readonly trap?: { readonly kind: string; readonly message: string };
  readonly fuel_used: number;
  /** What a custom_action step would make of this output. */
  readonly contract: ContractCheck;
}

export interface SimulationInput {
  readonly orgId: string;
  readonly actionId: string;
  readonly digest: string;
  readonly permissions: readonly string[];
  readonly payloadJson: string;
}

/** What `parseActionOutput` says about `outputJson`: ok, or the field of the first broken reserved key. */
export function checkContract(outputJson: string): ContractCheck {
  try {
    parseActionOutput(outputJson);
    return { ok: true };
  } catch (error) {
    if (error instanceof OutputContractError) return { ok: false, field: error.field, message: error.message };
    throw error;
  }
}

function rawOutput(outputJson: string): RawJson | null {
  if (nestsDeeperThan(outputJson)) return null;
  try {
    JSON.parse(outputJson);
    return new RawJson(outputJson);
  } catch {
    return null;
  }
}

/**
 * Runs the module once with `simulate: true`: the runner injects no secret and records nothing, so
 * the idempotency key and fence it requires on the wire are throwaway values.
 */
export async function simulateAction(runner: ActionInvoker, input: SimulationInput): Promise<SimulationView> {
  const result = await runner.invoke({
    ...input,
    idempotencyKey: `simulate:${randomBytes(8).toString('hex')}`,
    fence: 1,
    simulate: true,
  });
  const { outcome } = result;
  switch (outcome.kind) {
    case 'output':
      return { outcome: 'output', output: rawOutput(outcome.outputJson), fuel_used: result.fuelUsed, contract: checkContract(outcome.outputJson) };
    case 'rejected':
      return {
        outcome: 'rejected',
        output: null,
        reason: outcome.reason,
        fuel_used: result.fuelUsed,
        contract: { ok: false, field: 'output', message: `The action rejected the payload (${REJECTION_HINT}), so there is no output; a run step would fail.` },
      };
    case 'trap':
      return {
        outcome: 'trap',
        output: null,
        trap: { kind: outcome.trap, message: outcome.message },
        fuel_used: result.fuelUsed,
        contract: { ok: false, field: 'output', message: `The action trapped (${outcome.trap})${trapHint(outcome.trap)}, so there is no output; a run step would fail.` },
      };
  }
}
