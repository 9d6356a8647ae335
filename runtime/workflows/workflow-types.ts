// The workflow document as stored and returned by the API (snake_case, like the wire format):
// a draft the parser produces, the current workflow, and the immutable versions runs pin.

import type { OrgId, StepId, WorkflowId } from '../../actors/ids.ts';

export type WorkflowEnvironment = 'production' | 'sandbox';
export type WorkflowStatus = 'enabled' | 'disabled';

/** A step's retry schedule, always complete once parsed (defaults filled in at write time). */
export interface StepRetry {
  readonly max_retries: number;
  readonly initial_ms: number;
  readonly max_ms: number;
}

interface StepBase {
  /** Stable across updates that repeat it; the step effect key is `${runId}:${id}`. */
  readonly id: StepId;
}

export interface WebhookStep extends StepBase {
  readonly type: 'webhook';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeout_ms: number;
  readonly retry?: StepRetry;
}

export interface CustomActionStep extends StepBase {
  readonly type: 'custom_action';
  readonly action_id: string;
  readonly retry?: StepRetry;
}

export interface DelayStep extends StepBase {
  readonly type: 'delay';
  /** Always present: `duration` is normalised to milliseconds at write time. */
  readonly duration_ms: number;
  /** The ISO-8601 duration as written, when the author used that form (kept for display). */
  readonly duration?: string;
}

export type WorkflowStep = WebhookStep | CustomActionStep | DelayStep;
export type WorkflowStepType = WorkflowStep['type'];
export const STEP_TYPES: readonly WorkflowStepType[] = ['webhook', 'custom_action', 'delay'];

/** What `parseWorkflowInput` returns: the writable part of a workflow, fully validated. */
export interface WorkflowDraft {
  readonly name: string;
  readonly trigger_event: string;
  readonly environment: WorkflowEnvironment;
  readonly status: WorkflowStatus;
  /** Live room channel that run progress is published on; absent = none. */
  readonly channel?: string;
  readonly steps: readonly WorkflowStep[];
}

/** The current state of a workflow: its draft plus identity and history counters. */
export interface Workflow extends WorkflowDraft {
  readonly id: WorkflowId;
  readonly org_id: OrgId;
  /** 1 on create, +1 on every accepted update. */
  readonly version: number;
  readonly created_at: string;
  readonly updated_at: string;
}

/** One immutable version; a run pins (workflow_id, version) and never sees later edits. */
export interface WorkflowVersion {
  readonly workflow_id: WorkflowId;
  readonly org_id: OrgId;
  readonly version: number;
  readonly created_at: string;
  readonly definition: WorkflowDraft;
}
