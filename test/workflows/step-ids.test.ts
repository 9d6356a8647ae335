// Step ids: given ids are kept across updates, missing ones are minted without reusing any id
// of the previous version, duplicates are refused; plus versioning and the run plan bridge.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asEventId, asOrgId, asRunId, asWorkflowId } from '../../actors/ids.ts';
import { DEFAULT_RETRY_POLICY } from '../../actors/retry-policy.ts';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import { runInputFor } from '../../runtime/workflows/run-plan.ts';
import { nextWorkflow, toWorkflowVersion } from '../../runtime/workflows/workflow-record.ts';
import { rejects } from './expect-input-error.ts';

const sequence = (...ids: string[]) => {
  const queue = [...ids];
  return { newStepId: () => queue.shift() ?? assert.fail('generator exhausted') };
};
const doc = (steps: unknown[]) => ({ name: 'w', trigger_event: 'order.created', steps });
const hook = (id?: string) => ({ ...(id === undefined ? {} : { id }), type: 'webhook', url: 'https://e.example/h' });

describe('step ids', () => {
  it('keeps given ids and assigns the missing ones at write time', () => {
    const draft = parseWorkflowInput(doc([hook('charge'), hook()]), undefined, sequence('s_1'));
    assert.deepEqual(draft.steps.map((s) => s.id), ['charge', 's_1']);
  });

  it('keeps ids across an update that repeats them, even when steps move', () => {
    const v1 = parseWorkflowInput(doc([hook(), { type: 'delay', duration: 'PT1M' }]), undefined, sequence('a1', 'b2'));
    const [first, second] = v1.steps;
    assert.ok(first && second);
    const v2 = parseWorkflowInput({ steps: [{ id: second.id, type: 'delay', duration: 'PT2M' }, hook(first.id), hook()] }, v1, sequence('c3'));
    assert.deepEqual(v2.steps.map((s) => s.id), ['b2', 'a1', 'c3']);
  });

  it('never mints an id the previous version or this document already uses', () => {
    const v1 = parseWorkflowInput(doc([hook()]), undefined, sequence('x'));
    const changed = { type: 'webhook', url: 'https://e.example/other' };
    const v2 = parseWorkflowInput({ steps: [changed, hook('y')] }, v1, sequence('x', 'y', 'z'));
    assert.deepEqual(v2.steps.map((s) => s.id), ['z', 'y']);
  });

  it('a step sent again without its id, unchanged and at its place, keeps its id: the same document is no change', () => {
    const v1 = parseWorkflowInput(doc([hook(), { type: 'delay', duration: 'PT1M' }]), undefined, sequence('a1', 'b2'));
    const again = parseWorkflowInput(doc([hook(), { type: 'delay', duration: 'PT1M' }]), v1, sequence('c3', 'd4'));
    assert.deepEqual(again, v1, 'nothing changed, so nothing differs (no new version)');
    // Changed, or moved to another place: a new step, with an id of its own.
    const moved = parseWorkflowInput(doc([{ type: 'delay', duration: 'PT1M' }, hook()]), v1, sequence('c3', 'd4'));
    assert.deepEqual(moved.steps.map((s) => s.id), ['c3', 'd4']);
  });

  it('rejects duplicate ids, naming the later step', () => {
    const error = rejects(doc([hook('dup'), hook('ok'), hook('dup')]), 'duplicate_step_id', 'steps[2].id');
    assert.match(error.message, /steps\[0\]/);
  });

  it('rejects ids outside [A-Za-z0-9_-]{1,64}', () => {
    rejects(doc([hook('has space')]), 'invalid_request', 'steps[0].id');
    rejects(doc([hook('x'.repeat(65))]), 'invalid_request', 'steps[0].id');
    rejects(doc([hook('')]), 'invalid_request', 'steps[0].id');
  });
});

describe('versions and run input', () => {
  const orgId = asOrgId('org_1');
  const workflowId = asWorkflowId('wf_1');

  it('numbers versions and keeps created_at', () => {
    const v1 = nextWorkflow(parseWorkflowInput(doc([hook('a')])), { orgId, workflowId, at: Date.UTC(2025, 0, 1) });
    const v2 = nextWorkflow(parseWorkflowInput({ status: 'disabled' }, v1), { orgId, workflowId, at: Date.UTC(2025, 0, 2), previous: v1 });
    assert.equal(v1.version, 1);
    assert.equal(v2.version, 2);
    assert.equal(v2.created_at, '2025-01-01T00:00:00.000Z');
    assert.equal(v2.updated_at, '2025-01-02T00:00:00.000Z');
    const pinned = toWorkflowVersion(v2);
    assert.equal(pinned.version, 2);
    assert.equal(pinned.definition.status, 'disabled');
    assert.equal('id' in pinned.definition, false);
  });

  it('turns a pinned version into a run plan with resolved retry policies and delays', () => {
    const draft = parseWorkflowInput(
      doc([hook('a'), { id: 'b', type: 'custom_action', action_id: 'risk', retry: { max_retries: 1, initial_ms: 10, max_ms: 20 } }, { id: 'c', type: 'delay', duration: 'PT5S' }]),
    );
    const version = toWorkflowVersion(nextWorkflow(draft, { orgId, workflowId, at: 0 }));
    const input = runInputFor(version, { runId: asRunId('run_1'), eventId: asEventId('evt_1'), skipSideEffects: false, at: 5 });
    assert.deepEqual(input.steps, [
      { id: 'a', type: 'webhook', retry: DEFAULT_RETRY_POLICY, delayMs: null },
      { id: 'b', type: 'custom_action', retry: { maxRetries: 1, initialMs: 10, maxMs: 20 }, delayMs: null },
      { id: 'c', type: 'delay', retry: null, delayMs: 5000 },
    ]);
    assert.equal(input.workflowVersion, 1);
    assert.equal(input.createdAt, 5);
  });
});
