// The trigger index ingest matches events against: which enabled workflows an (org, environment,
// trigger event) starts, at which version, and what they weigh together against the trigger caps.
//
//   workflow-triggers   [orgId, environment, trigger_event, workflowId]  -> [current version, its JSON size], present iff enabled
//                       (older entries hold the version alone, or null: matching then reads the workflow)

import type { LedgerTable } from '../ledger/ledger.ts';
import { versionSize } from './version-bytes.ts';
import { toWorkflowVersion } from './workflow-record.ts';
import type { TriggerOverflow } from './write-outcome.ts';
import type { Workflow, WorkflowVersion } from './workflow-types.ts';

const HIGH = '\uffff';

/** What `matching` remembers of a matching workflow: its current version, read through the pinned cache each time. */
export type MatchRef = readonly [workflowId: string, version: number] | WorkflowVersion;

/** True for a ref that names a version (read it); false for one that holds it whole (older data). */
export const isVersionRef = (ref: MatchRef): ref is readonly [string, number] => Array.isArray(ref);

/** Reads a pinned version, as WorkflowStore.version does (through the pinned cache). */
export type ReadVersion = (orgId: string, workflowId: string, version: number) => WorkflowVersion | undefined;

/** What one trigger's enabled workflows may hold together (MAX_TRIGGER_BYTES) and how many they may be (MAX_WORKFLOWS_PER_TRIGGER). */
export interface TriggerCaps {
  readonly bytes: number;
  readonly workflows: number;
}

export class TriggerIndex {
  readonly #triggers: LedgerTable;
  readonly #workflows: LedgerTable;
  readonly #version: ReadVersion;
  readonly #caps: TriggerCaps;

  constructor(triggers: LedgerTable, workflows: LedgerTable, version: ReadVersion, caps: TriggerCaps) {
    this.#triggers = triggers;
    this.#workflows = workflows;
    this.#version = version;
    this.#caps = caps;
  }

  /** The enabled workflows of (org, environment) on `eventType`, each naming its current version. Only reads. */
  matches(orgId: string, environment: string, eventType: string): MatchRef[] {
    const matches: MatchRef[] = [];
    const entries = this.#triggers.getRange({ start: [orgId, environment, eventType], end: [orgId, environment, eventType, HIGH] });
    for (const { key, value } of entries) {
      const [keyOrg, keyEnv, keyType, workflowId] = key as [string, string, string, string];
      if (keyOrg !== orgId || keyEnv !== environment || keyType !== eventType) continue;
      // A trigger entry exists only for an enabled workflow and holds its current version.
      const current = triggerVersion(value);
      const pinned = current === undefined ? undefined : this.#version(orgId, workflowId, current);
      if (pinned !== undefined) {
        matches.push([workflowId, pinned.version]);
        continue;
      }
      // Entries written before triggers held the version: read the workflow itself.
      const workflow = this.#workflows.get([orgId, workflowId]) as Workflow | undefined;
      if (workflow === undefined || workflow.status !== 'enabled') continue;
      // A workflow whose version record is missing (older data) is kept whole: it has nothing to read again.
      matches.push(this.#version(orgId, workflowId, workflow.version) === undefined ? toWorkflowVersion(workflow) : [workflowId, workflow.version]);
    }
    return matches;
  }

  /**
   * How `next`, whose version weighs `size`, would take its trigger's enabled workflows past their
   * caps; undefined if it fits or is disabled. A version that grows nothing goes through: one
   * already enabled there does not count again. In the write transaction.
   */
  overflow(next: Workflow, size: number): TriggerOverflow | undefined {
    if (next.status !== 'enabled') return undefined;
    const sizes = this.#enabledSizes(next);
    const trigger = { event: next.trigger_event, environment: next.environment };
    if (sizes.own === undefined && sizes.others >= this.#caps.workflows) {
      return { ...trigger, kind: 'workflows', limit: this.#caps.workflows, others: sizes.others };
    }
    const others = sizes.total - (sizes.own ?? 0);
    if (others + size > this.#caps.bytes && size > (sizes.own ?? 0)) {
      return { ...trigger, kind: 'bytes', limit: this.#caps.bytes, others, size };
    }
    return undefined;
  }

  /** Moves the entry from `previous` (if any) to `next`, which has one only if enabled. In the write transaction. */
  moveWithin(previous: Workflow | undefined, next: Workflow, size: number): void {
    if (previous !== undefined) this.#triggers.remove(triggerKey(previous));
    if (next.status === 'enabled') this.#triggers.put(triggerKey(next), [next.version, size]);
  }

  /** Removes a deleted workflow's entry, so no new run pins it. In the deleting transaction. */
  removeWithin(workflow: Workflow): void {
    this.#triggers.remove(triggerKey(workflow));
  }

  /** The JSON size of the enabled workflows on `workflow`'s trigger, and of its own entry there if it has one; how many others there are. */
  #enabledSizes(workflow: Workflow): { total: number; own: number | undefined; others: number } {
    const [orgId, environment, event] = triggerKey(workflow);
    let total = 0;
    let own: number | undefined;
    let others = 0;
    for (const { key, value } of this.#triggers.getRange({ start: [orgId, environment, event], end: [orgId, environment, event, HIGH] })) {
      const workflowId = (key as string[])[3]!;
      const size = this.#entrySize(orgId, workflowId, value);
      total += size;
      if (workflowId === workflow.id) own = size;
      else others += 1;
    }
    return { total, own, others };
  }

  /** What one trigger entry weighs: stored with it, or (older entries) measured from its version. */
  #entrySize(orgId: string, workflowId: string, value: unknown): number {
    if (Array.isArray(value)) return value[1] as number;
    const current = triggerVersion(value) ?? (this.#workflows.get([orgId, workflowId]) as Workflow | undefined)?.version;
    const version = current === undefined ? undefined : this.#version(orgId, workflowId, current);
    return version === undefined ? 0 : versionSize(version);
  }
}

/** The version a trigger entry names: [version, size] now, a bare version or null (read the workflow) before. */
const triggerVersion = (value: unknown): number | undefined => (Array.isArray(value) ? (value[0] as number) : typeof value === 'number' ? value : undefined);
const triggerKey = (workflow: Workflow): [string, string, string, string] => [workflow.org_id, workflow.environment, workflow.trigger_event, workflow.id];
