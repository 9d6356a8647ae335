// Workflow document parsing: defaults, every rejection naming its field, and update merging.
// Step id stability across updates lives in step-ids.test.ts; steps' own rules in parse-step.test.ts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import { rejects } from './expect-input-error.ts';

let counter = 0;
const options = { newStepId: () => `gen_${++counter}` };

const base = () => ({
  name: 'Notify ledger',
  trigger_event: 'payment.succeeded',
  steps: [{ type: 'webhook', url: 'https://example.com/hook' }],
});

describe('parseWorkflowInput: create', () => {
  it('fills defaults: production, enabled, webhook timeout 10 s, no channel', () => {
    const draft = parseWorkflowInput(base(), undefined, options);
    assert.equal(draft.environment, 'production');
    assert.equal(draft.status, 'enabled');
    assert.equal('channel' in draft, false);
    const [step] = draft.steps;
    assert.ok(step?.type === 'webhook');
    assert.equal(step.timeout_ms, 10_000);
    assert.deepEqual(step.headers, {});
    assert.equal(step.retry, undefined);
    assert.match(step.id, /^gen_\d+$/);
  });

  it('rejects a non-object body without a field', () => {
    rejects([], 'invalid_request', undefined);
    rejects(null, 'invalid_request', undefined);
  });

  it('requires name, trigger_event and steps on create', () => {
    for (const key of ['name', 'trigger_event', 'steps'] as const) {
      const body: Record<string, unknown> = base();
      delete body[key];
      rejects(body, 'invalid_request', key);
    }
  });

  it('rejects an empty or blank name and one over 200 characters', () => {
    rejects({ ...base(), name: '' }, 'invalid_request', 'name');
    const blank = rejects({ ...base(), name: '   ' }, 'invalid_request', 'name');
    assert.match(blank.message, /must not be empty/);
    rejects({ ...base(), name: 'x'.repeat(201) }, 'invalid_request', 'name');
    assert.equal(parseWorkflowInput({ ...base(), name: 'x'.repeat(200) }, undefined, options).name.length, 200);
  });

  it('checks the trigger event type charset and length', () => {
    rejects({ ...base(), trigger_event: 'payment succeeded' }, 'invalid_request', 'trigger_event');
    rejects({ ...base(), trigger_event: 'a'.repeat(129) }, 'invalid_request', 'trigger_event');
    for (const unfireable of ['.payment', '-x', ':x']) rejects({ ...base(), trigger_event: unfireable }, 'invalid_request', 'trigger_event');
    assert.equal(parseWorkflowInput({ ...base(), trigger_event: 'stripe:invoice.paid_v2-x' }, undefined, options).trigger_event, 'stripe:invoice.paid_v2-x');
  });

  it('rejects an unknown environment and status', () => {
    const error = rejects({ ...base(), environment: 'staging' }, 'invalid_request', 'environment');
    assert.match(error.message, /"production", "sandbox"/);
    rejects({ ...base(), status: 'paused' }, 'invalid_request', 'status');
    assert.equal(parseWorkflowInput({ ...base(), environment: 'sandbox', status: 'disabled' }, undefined, options).environment, 'sandbox');
  });

  it('checks the channel name', () => {
    rejects({ ...base(), channel: 'Orders' }, 'invalid_request', 'channel');
    rejects({ ...base(), channel: 'a'.repeat(65) }, 'invalid_request', 'channel');
    assert.equal(parseWorkflowInput({ ...base(), channel: 'orders.eu-1_x' }, undefined, options).channel, 'orders.eu-1_x');
  });

  it('rejects unknown top-level fields, and says when a field is read-only', () => {
    const typo = rejects({ ...base(), trigger_evnt: 'x' }, 'unknown_field', 'trigger_evnt');
    assert.match(typo.message, /not a known field/);
    const readOnly = rejects({ ...base(), version: 3 }, 'unknown_field', 'version');
    assert.match(readOnly.message, /read-only/);
  });

  it('takes 1 to 50 steps', () => {
    rejects({ ...base(), steps: [] }, 'invalid_request', 'steps');
    rejects({ ...base(), steps: { type: 'webhook' } }, 'invalid_request', 'steps');
    const step = { type: 'delay', duration_ms: 1000 };
    const error = rejects({ ...base(), steps: Array.from({ length: 51 }, () => step) }, 'invalid_request', 'steps');
    assert.match(error.message, /at most 50/);
    assert.equal(parseWorkflowInput({ ...base(), steps: Array.from({ length: 50 }, () => step) }, undefined, options).steps.length, 50);
  });

  it('rejects a step type it does not support, naming steps[i].type', () => {
    const error = rejects(
      { ...base(), steps: [{ type: 'webhook', url: 'https://a.example' }, { type: 'email', to: 'x@example.com' }] },
      'unsupported_step_type',
      'steps[1].type',
    );
    assert.match(error.message, /"email" is not supported/);
    rejects({ ...base(), steps: [{ url: 'https://a.example' }] }, 'invalid_request', 'steps[0].type');
    rejects({ ...base(), steps: ['webhook'] }, 'invalid_request', 'steps[0]');
  });

  it('produces the same error body shape the API returns', () => {
    const error = rejects({ ...base(), steps: [{ type: 'sms' }] }, 'unsupported_step_type', 'steps[0].type');
    assert.deepEqual(Object.keys(error.toBody().error), ['code', 'message', 'field']);
  });
});

describe('parseWorkflowInput: update', () => {
  const existing = () => parseWorkflowInput({ ...base(), channel: 'orders', environment: 'sandbox' }, undefined, options);

  it('keeps absent fields and validates given ones', () => {
    const before = existing();
    const after = parseWorkflowInput({ status: 'disabled' }, before, options);
    assert.equal(after.status, 'disabled');
    assert.equal(after.name, before.name);
    assert.equal(after.environment, 'sandbox');
    assert.equal(after.channel, 'orders');
    assert.deepEqual(after.steps, before.steps);
    rejects({ name: '' }, 'invalid_request', 'name', before);
  });

  it('removes the channel on null', () => {
    assert.equal('channel' in parseWorkflowInput({ channel: null }, existing(), options), false);
  });

  it('keeps the environment fixed: the same one is accepted, another is refused', () => {
    assert.equal(parseWorkflowInput({ ...base(), environment: 'sandbox' }, existing(), options).environment, 'sandbox', 'a PUT of the full body');
    const error = rejects({ environment: 'production' }, 'invalid_request', 'environment', existing());
    assert.match(error.message, /cannot change .*create a new workflow in production/);
  });
});
