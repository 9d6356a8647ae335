// What a viewer key sees of a workflow. Webhook steps carry their receivers' credentials in header
// values and URL query strings (the URL parser tells authors to put them in a header), and secrets
// never appear in API answers to a role that cannot change them (DESIGN §8): for a viewer those
// values read as "[redacted]"; names stay, so the workflow is still explained.

import type { WorkflowDraft, WorkflowStep, WorkflowVersion } from './workflow-types.ts';

export const REDACTED = '[redacted]';

function redactUrl(text: string): string {
  const url = new URL(text);
  if (url.search === '') return text;
  const names = [...url.searchParams.keys()].map((name) => `${encodeURIComponent(name)}=${REDACTED}`);
  return `${url.origin}${url.pathname}?${names.join('&')}${url.hash}`;
}

function redactStep(step: WorkflowStep): WorkflowStep {
  if (step.type !== 'webhook') return step;
  const headers = Object.fromEntries(Object.keys(step.headers).map((name) => [name, REDACTED]));
  return { ...step, url: redactUrl(step.url), headers };
}

/** The workflow (or draft) with its webhook steps' header values and URL query values redacted. */
export const redactWorkflow = <T extends WorkflowDraft>(workflow: T): T => ({ ...workflow, steps: workflow.steps.map(redactStep) });

export const redactVersion = (version: WorkflowVersion): WorkflowVersion => ({ ...version, definition: redactWorkflow(version.definition) });
