// A viewer's read of a run searches for the workflow's credentials within SCRUB_BUDGET: a workflow
// within the caps can carry 100,000 token-like words, and searching every answer of a run for all
// of them held the event loop for 30 s. Past the budget a string reads as "[redacted]" whole, never
// unsearched; an ordinary run is scrubbed as before.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunView } from '../../actors/run-view.ts';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import { REDACTED, redactRunView } from '../../runtime/workflows/viewer-redaction.ts';

const TOKEN = 'Sk9TokenValue';

/** A run view of `steps` webhook steps, each with `attempts` attempts that recorded `answer`. */
function runWith(stepIds: readonly string[], attempts: number, answer: string): RunView {
  const evidence = { url: 'https://example.com/hook', status: 500, body: answer, body_truncated: false };
  const steps = stepIds.map((id, index) => ({
    id,
    index,
    type: 'webhook',
    status: 'failed',
    result: null,
    attempts: Array.from({ length: attempts }, (_, n) => ({ attempt: n + 1, fence: n + 1, outcome: 'failed', error: null, after_cancel: null, evidence })),
  }));
  return { run_id: 'run_budget', steps } as unknown as RunView;
}

const bodiesOf = (view: RunView): string[] =>
  view.steps.flatMap((step) => step.attempts.map((attempt) => (attempt.evidence as { body: string }).body));

test('an ordinary run is scrubbed string by string: the credential masked, the rest kept', () => {
  const workflow = parseWorkflowInput({
    name: 'w',
    trigger_event: 'order.paid',
    steps: Array.from({ length: 50 }, (_, n) => ({ id: `s${n}`, type: 'webhook', url: 'https://example.com/hook', headers: { authorization: `Bearer ${TOKEN}` } })),
  });
  const answer = `${'x'.repeat(4000)} token ${TOKEN} refused`;
  const bodies = bodiesOf(redactRunView(runWith(workflow.steps.map((step) => step.id), 25, answer), workflow));
  assert.equal(bodies.length, 1250);
  for (const body of bodies) assert.equal(body, `${'x'.repeat(4000)} token ${REDACTED} refused`);
});

test('past the budget a string reads as [redacted] whole; before it, strings are scrubbed', () => {
  const workflow = parseWorkflowInput({ name: 'w', trigger_event: 'order.paid', steps: [{ id: 'a', type: 'webhook', url: 'https://example.com/hook', headers: { authorization: `Bearer ${TOKEN}` } }] });
  const answer = `quoted ${TOKEN} here`;
  // Enough for a few strings of this size against this workflow's handful of credentials.
  const view = redactRunView(runWith(['a'], 10, answer), workflow, 500);
  const bodies = bodiesOf(view);
  const scrubbed = bodies.filter((body) => body === `quoted ${REDACTED} here`).length;
  assert.ok(scrubbed >= 1 && scrubbed < 10, `${scrubbed} of 10 scrubbed`);
  assert.deepEqual(bodies.slice(scrubbed), Array(10 - scrubbed).fill(REDACTED), 'every string past the budget whole');
});

test('a workflow made of 100,000 token words: its run reads within the budget, every answer whole [redacted]', () => {
  let n = 0;
  const words = (): string => {
    let value = '';
    while (value.length + 9 <= 1024) value += `${value === '' ? '' : ' '}w${String(n++).padStart(7, '0')}`;
    return value;
  };
  const steps = Array.from({ length: 50 }, (_, i) => ({ id: `s${i}`, type: 'webhook', url: 'https://example.com/hook', headers: Object.fromEntries(Array.from({ length: 20 }, (_, j) => [`x-h${j}`, words()])) }));
  const workflow = parseWorkflowInput({ name: 'w', trigger_event: 'order.paid', steps });
  assert.ok(n > 100_000);
  const bodies = bodiesOf(redactRunView(runWith(workflow.steps.map((step) => step.id), 2, 'w000000'.repeat(585)), workflow));
  assert.equal(bodies.length, 100);
  for (const body of bodies) assert.equal(body, REDACTED);
});
