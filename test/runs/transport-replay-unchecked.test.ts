// Transport replay reports a schema refusal as the 422 ingest would answer, and fails (as the
// request would) when the check could not be made at all: a stopping or busy checker is not a
// property of the payload, and reading it as `would_answer: 422` would blame the sender.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError, RetryableError } from '../../runtime/errors.ts';
import { rootEvent, type Recording } from '../../runtime/events/event-record.ts';
import type { Inbox } from '../../runtime/inbox/inbox.ts';
import { explainTransportReplay, type TransportReplayDeps } from '../../runtime/replay/transport-replay.ts';
import type { SchemaChecks } from '../../runtime/sources/schema-checks.ts';
import type { SourceRecord } from '../../runtime/sources/source-record.ts';

const at = Date.UTC(2026, 11, 4);
const source: SourceRecord = { org_id: 'acct-tr', name: 'in', scheme: 'standard-webhooks', secrets: ['whsec_x'], environment: 'production', event_types: { 'order.paid': { type: 'object', required: ['id'] } }, body_limit_bytes: 1024, created_at: new Date(at).toISOString(), updated_at: new Date(at).toISOString() };
const body = '{"type":"order.paid"}';
const event = rootEvent({ id: 'evt-tr', org_id: 'acct-tr', type: 'order.paid', payload: { type: 'order.paid' }, environment: 'production', source: 'in', provider_event_id: null, received_at_ms: at });
const recording: Recording = { method: 'POST', path: '/hooks/acct-tr/in', headers: {}, body, body_bytes: body.length, body_truncated: false, verifier: null, received_at: new Date(at).toISOString() };
const depsChecking = (check: () => Promise<void>): TransportReplayDeps => ({
  source,
  schemaChecks: { check } as unknown as SchemaChecks,
  sandboxAllowed: true,
  inbox: {} as Inbox,
  matching: () => [],
  nowMs: at,
});

test('a schema refusal is reported as the 422 ingest would answer', async () => {
  const report = await explainTransportReplay(event, recording, depsChecking(() => Promise.reject(new InputError(422, 'schema_mismatch', 'missing id', { field: 'payload.id' }))));
  assert.deepEqual(report.would_answer, { status: 422, code: 'schema_mismatch' });
  assert.deepEqual(report.schema, { ok: false, code: 'schema_mismatch', field: 'payload.id', message: 'missing id' });
});

test('a check that could not be made fails the explanation with its own error, not a 422 of the payload', async () => {
  const stopping = new RetryableError('stopping', 'Sluice is stopping; send it again in a few seconds.', 2000);
  await assert.rejects(explainTransportReplay(event, recording, depsChecking(() => Promise.reject(stopping))), (error) => error === stopping);
});
