// What the transaction body of a workflow store write answers (its value, or why it wrote
// nothing), and the API error each refusal becomes once the transaction has settled.

import { ConflictError, notFound } from '../errors.ts';
import { MAX_VERSIONS_PER_WORKFLOW, MAX_WORKFLOWS_PER_ORG } from './workflow-limits.ts';

/**
 * A trigger's enabled workflows would outgrow MAX_TRIGGER_BYTES (`bytes`: what they hold without
 * this one, and this one) or MAX_WORKFLOWS_PER_TRIGGER (`workflows`: how many there are without it).
 */
export type TriggerOverflow = { readonly event: string; readonly environment: string } & (
  | { readonly kind: 'bytes'; readonly limit: number; readonly others: number; readonly size: number }
  | { readonly kind: 'workflows'; readonly limit: number; readonly others: number }
);

/** A version the org's stored version bytes cannot take (MAX_VERSION_BYTES_PER_ORG). */
interface StorageOverflow {
  readonly limit: number;
  readonly used: number;
  readonly size: number;
}

/** Why WorkflowStore's #putVersion wrote nothing. */
export type VersionRefused =
  | { readonly ok: false; readonly reason: 'trigger'; readonly overflow: TriggerOverflow }
  | { readonly ok: false; readonly reason: 'storage'; readonly overflow: StorageOverflow };

/** What a write's transaction body answers: its value, or why it wrote nothing (`unwrap` throws that). */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: 'missing' | 'limit' | 'versions' | 'conflict' | 'superseded'; readonly current?: number }
  | VersionRefused;

const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(bytes < 1024 * 1024 ? 2 : 1)} MiB`;

/** The value of a write that went through; otherwise throws the API error (404 or 409) of its refusal. `id` names the workflow. */
export function unwrap<T>(outcome: Outcome<T>, id: string): T {
  if (outcome.ok) return outcome.value;
  switch (outcome.reason) {
    case 'missing':
      throw notFound(`Workflow "${id}"`, 'workflow_id');
    case 'limit':
      throw new ConflictError('workflow_limit_reached', `An organization can hold at most ${MAX_WORKFLOWS_PER_ORG} workflows; delete one first.`);
    case 'versions':
      throw new ConflictError('version_limit_reached', `A workflow has at most ${MAX_VERSIONS_PER_WORKFLOW} versions; create a new workflow (and delete this one) to go on changing it.`);
    case 'trigger': {
      const overflow = outcome.overflow;
      const { event, environment, limit, others } = overflow;
      if (overflow.kind === 'workflows') {
        throw new ConflictError(
          'trigger_workflow_limit_reached',
          `At most ${limit} enabled workflows may listen to event type "${event}" in ${environment} (each such event starts a run of every one); ` +
            `${others} already do. Disable one of them first, or add steps to one that listens already.`,
          { limit_workflows: limit, enabled_workflows: others },
        );
      }
      const { size } = overflow;
      throw new ConflictError(
        'trigger_size_limit_reached',
        `The enabled workflows of event type "${event}" in ${environment} may hold at most ${mib(limit)} of JSON together (every such event reads them all); ` +
          `the others hold ${mib(others)} and this version ${mib(size)}. Disable or shrink one of them first.`,
        { limit_bytes: limit, enabled_bytes: others, version_bytes: size },
      );
    }
    case 'storage': {
      const { limit, used, size } = outcome.overflow;
      throw new ConflictError(
        'workflow_storage_limit_reached',
        `An organization's workflow versions may hold at most ${mib(limit)} (every version of every workflow, and of deleted workflows until they are pruned, --retention-days after the delete); ` +
          `they hold ${mib(used)} and this version ${mib(size)}. Delete workflows you no longer use; disabling one always works.`,
        { limit_bytes: limit, used_bytes: used, version_bytes: size },
      );
    }
    case 'superseded':
      throw new ConflictError(
        'rotation_superseded',
        'The rotation this Idempotency-Key made was followed by later ones, which dropped its secret; nothing was rotated now. Rotate with a new key if you mean to.',
      );
    case 'conflict':
      throw new ConflictError('workflow_version_conflict', 'The workflow was changed by another request; read it again and retry.', {
        current_version: outcome.current,
      });
  }
}
