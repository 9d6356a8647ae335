// Test helper: asserts a workflow body is refused with a 400 InputError of a given code and field.
// Shared by the workflow parser suites so each names the exact field it expects.

import assert from 'node:assert/strict';
import { InputError } from '../../runtime/errors.ts';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import type { WorkflowDraft } from '../../runtime/workflows/workflow-types.ts';

let minted = 0;
const options = { newStepId: () => `gen_${++minted}` };

export function rejects(body: unknown, code: string, field: string | undefined, existing?: WorkflowDraft): InputError {
  try {
    parseWorkflowInput(body, existing, options);
  } catch (error) {
    assert.ok(error instanceof InputError, `expected InputError, got ${String(error)}`);
    assert.equal(error.status, 400);
    assert.equal(error.code, code, error.message);
    assert.equal(error.field, field, error.message);
    return error;
  }
  return assert.fail(`expected ${code} on ${String(field)}`);
}
