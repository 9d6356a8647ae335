// The output contract's reserved keys, parsed as a custom_action step and a simulation would:
// `derived_event` is exactly `{type, payload}` or `false`, anything else names the field.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseActionOutput } from '../../runtime/actions/output-contract.ts';
import { checkContract } from '../../runtime/actions/simulate-action.ts';

test('derived_event false means none; {type, payload} is a derived event, whatever JSON the payload is', () => {
  assert.equal(parseActionOutput('{"derived_event":false}').derivedEvent, null);
  assert.deepEqual(parseActionOutput('{"derived_event":{"type":"a.b","payload":{"n":1}}}').derivedEvent, { type: 'a.b', payload: { n: 1 } });
  assert.deepEqual(parseActionOutput('{"derived_event":{"type":"a.b","payload":null}}').derivedEvent, { type: 'a.b', payload: null });
});

test('derived_event null, a missing payload, a bad type or an extra key fails the contract naming the field', () => {
  assert.deepEqual(checkContract('{"derived_event":null}'), { ok: false, field: 'derived_event', message: 'derived_event must be {"type", "payload"} or false.' });
  const noPayload = checkContract('{"derived_event":{"type":"a.b"}}');
  assert.equal(noPayload.ok, false);
  assert.equal(!noPayload.ok && noPayload.field, 'derived_event.payload');
  const badType = checkContract('{"derived_event":{"type":"no spaces","payload":{}}}');
  assert.equal(!badType.ok && badType.field, 'derived_event.type');
  const extra = checkContract('{"derived_event":{"type":"a.b","payload":1,"delay_ms":5}}');
  assert.equal(!extra.ok && extra.field, 'derived_event.delay_ms');
});
