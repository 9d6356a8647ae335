// The output contract's reserved keys, parsed as a custom_action step and a simulation would:
// `derived_event` is exactly `{type, payload}` or `false`, anything else names the field; a numeric
// projection id must survive JSON.parse exactly.

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

test('a numeric projection.entity_id must be a whole number JSON.parse keeps exact; a larger id comes as a string', () => {
  const projection = (id: string) => `{"projection":{"name":"risk","entity_type":"order","entity_id":${id}}}`;
  assert.deepEqual(parseActionOutput(projection('9007199254740991')).projection?.entity, { type: 'order', id: '9007199254740991' });
  assert.deepEqual(parseActionOutput(projection('"820982911946154508"')).projection?.entity, { type: 'order', id: '820982911946154508' });
  for (const id of ['820982911946154508', '820982911946154509', '1.5', '1e400']) {
    const check = checkContract(projection(id));
    assert.equal(!check.ok && check.field, 'projection.entity_id', id);
  }
});
