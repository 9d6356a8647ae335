// The worker thread that checks event payloads against their source's (or device's) schema,
// compiles the schemas a write declares (event-schemas.ts), and reads large webhook bodies (checks
// and parses them, answering what ingest needs of them), one request at a time: work that takes
// long holds this thread, never the event loop every tenant shares; schema-checks.ts ends the
// thread past a deadline.

import { parentPort } from 'node:worker_threads';
import { SluiceError } from '../errors.ts';
import { parseApiJsonText, readJsonText } from '../http/parse-json.ts';
import { topLevelShape } from '../validation/top-level-shape.ts';
import { bodyFactsOf, type BodyFacts } from '../ingest/body-facts.ts';
import { assertSchemasCompile, compiledValidator, validateWith } from './event-schemas.ts';

/**
 * What the checking side asks: `payloadJson` against `schemaText`, declared by (orgId, name) for
 * `type`; whether every schema of a write (`eventTypesText`, type -> schema) compiles; or the
 * facts of a webhook body's `text` (readJsonText's checks, then bodyFactsOf), or of a large API
 * body's, with its top level (parseApiJsonText's checks, then topLevelShape).
 */
export type CheckRequest =
  | { readonly kind: 'payload'; readonly id: number; readonly orgId: string; readonly name: string; readonly type: string; readonly schemaText: string; readonly payloadJson: string }
  | { readonly kind: 'compile'; readonly id: number; readonly eventTypesText: string }
  | { readonly kind: 'body'; readonly id: number; readonly text: string; readonly apiBody?: boolean };

/**
 * What this thread answers: first `ready`, then per request, in order, `compiled` (a payload
 * request's validator is ready: the check proper starts) and one result.
 */
export type CheckAnswer =
  | { readonly kind: 'ready' }
  | { readonly kind: 'compiled'; readonly id: number }
  | { readonly kind: 'passed'; readonly id: number }
  | { readonly kind: 'read'; readonly id: number; readonly facts: BodyFacts; readonly shape?: unknown }
  | { readonly kind: 'refused'; readonly id: number; readonly status: number; readonly code: string; readonly message: string; readonly field: string | undefined };

const port = parentPort;
if (port === null) throw new Error('schema-check-worker.ts runs as a worker thread (schema-checks.ts starts it)');

port.on('message', (request: CheckRequest) => {
  let answer: CheckAnswer;
  try {
    if (request.kind === 'body') {
      // An API body (apiBody) is also held to the API's rule on lone surrogates, and answers its top level.
      const value = request.apiBody === true ? parseApiJsonText(request.text) : readJsonText(request.text);
      port.postMessage({ kind: 'read', id: request.id, facts: bodyFactsOf(value), ...(request.apiBody === true ? { shape: topLevelShape(value) } : {}) } satisfies CheckAnswer);
      return;
    }
    if (request.kind === 'compile') assertSchemasCompile(JSON.parse(request.eventTypesText) as Record<string, object>);
    else {
      // The schema's text versions its cached validator: a changed schema is compiled again.
      const declarer = { org_id: request.orgId, name: request.name, updated_at: request.schemaText, event_types: { [request.type]: JSON.parse(request.schemaText) as object } };
      const validate = compiledValidator(declarer, request.type);
      // V8 compiles a generated validator's code on its first call: that is compiling too (a large
      // schema's first call took longer than a check may), so it happens before `compiled`.
      validate?.(null);
      port.postMessage({ kind: 'compiled', id: request.id } satisfies CheckAnswer);
      if (validate !== undefined) validateWith(validate, JSON.parse(request.payloadJson));
    }
    answer = { kind: 'passed', id: request.id };
  } catch (error) {
    const refusal = error instanceof SluiceError ? error : new SluiceError(422, 'schema_check_failed', `The payload could not be checked against its schema: ${error instanceof Error ? error.message : String(error)}`);
    answer = { kind: 'refused', id: request.id, status: refusal.status, code: refusal.code, message: refusal.message, field: refusal.field };
  }
  port.postMessage(answer);
});
port.postMessage({ kind: 'ready' } satisfies CheckAnswer);
