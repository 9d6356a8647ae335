// What a viewer key sees of a workflow and of its runs. Webhook steps carry their receivers'
// credentials in header values, URL query strings and URL paths (Slack's and Discord's webhook URLs
// hold their token in the path), and secrets never appear in API answers to a role that cannot
// change them (DESIGN §8): for a viewer those values read as "[redacted]", in the workflow and in
// the URL a run's webhook attempts record as evidence; names and plain path words stay, so the
// workflow and the run are still explained.

import type { JsonValue } from '../../actors/json.ts';
import type { RunView } from '../../actors/run-view.ts';
import type { WorkflowDraft, WorkflowStep, WorkflowVersion } from './workflow-types.ts';

export const REDACTED = '[redacted]';

/** A path segment kept for viewers: a lowercase word ("hooks", "in"). Ids and tokens have digits or capitals. */
const PLAIN_SEGMENT = /^[a-z._-]{0,32}$/;

function redactUrl(text: string): string {
  const url = new URL(text);
  const path = url.pathname.split('/').map((segment) => (PLAIN_SEGMENT.test(segment) ? segment : REDACTED)).join('/');
  const names = [...url.searchParams.keys()].map((name) => `${encodeURIComponent(name)}=${REDACTED}`);
  return `${url.origin}${path}${url.search === '' ? '' : `?${names.join('&')}`}${url.hash === '' ? '' : `#${REDACTED}`}`;
}

function redactStep(step: WorkflowStep): WorkflowStep {
  if (step.type !== 'webhook') return step;
  const headers = Object.fromEntries(Object.keys(step.headers).map((name) => [name, REDACTED]));
  return { ...step, url: redactUrl(step.url), headers };
}

/** The workflow (or draft) with its webhook steps' header values and URL query values redacted. */
export const redactWorkflow = <T extends WorkflowDraft>(workflow: T): T => ({ ...workflow, steps: workflow.steps.map(redactStep) });

export const redactVersion = (version: WorkflowVersion): WorkflowVersion => ({ ...version, definition: redactWorkflow(version.definition) });

/** Attempt evidence with its recorded `url` (a webhook attempt's) redacted as in the workflow. */
function redactEvidence(evidence: JsonValue | null): JsonValue | null {
  if (evidence === null || typeof evidence !== 'object' || Array.isArray(evidence)) return evidence;
  const fields = evidence as { readonly [key: string]: JsonValue };
  const url = fields['url'];
  return typeof url === 'string' && URL.canParse(url) ? { ...fields, url: redactUrl(url) } : evidence;
}

/** The run as a viewer sees it: its webhook attempts' URLs redacted. */
export const redactRunView = (run: RunView): RunView => ({
  ...run,
  steps: run.steps.map((step) => ({
    ...step,
    attempts: step.attempts.map((a) => ({
      ...a,
      evidence: redactEvidence(a.evidence),
      after_cancel: a.after_cancel === null ? null : { ...a.after_cancel, evidence: redactEvidence(a.after_cancel.evidence) },
    })),
  })),
});
