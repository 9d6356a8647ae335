// What a viewer key sees of a workflow. Webhook steps carry their receivers' credentials in header
// values, URL query strings and URL paths (Slack's and Discord's webhook URLs hold their token in
// the path), and secrets never appear in API answers to a role that cannot change them (DESIGN §8):
// for a viewer those values read as "[redacted]"; names and plain path words stay, so the workflow
// is still explained.

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
