// The output contract's reserved keys, parsed as a custom_action step and a simulation would:
// `derived_event` is exactly `{type, payload}` or `false`, anything else names the field; a numeric
// projection id must survive JSON.parse exactly; the projection's text fields keep to their caps.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseActionOutput } from '../../runtime/actions/output-contract.ts';
import { loneSurrogatePath } from '../../runtime/validation/lone-surrogate.ts';
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
  const reserved = checkContract('{"derived_event":{"type":"device.disconnected","payload":{}}}');
  assert.equal(!reserved.ok && reserved.field, 'derived_event.type', 'only Sluice writes device connection events');
  const extra = checkContract('{"derived_event":{"type":"a.b","payload":1,"delay_ms":5}}');
  assert.equal(!extra.ok && extra.field, 'derived_event.delay_ms');
});

test('a numeric projection.entity_id must be a whole number JSON.parse keeps exact; a larger id comes as a string', () => {
  const projection = (id: string) => `{"projection":{"name":"risk","entity_type":"order","entity_id":${id}}}`;
  assert.deepEqual(parseActionOutput(projection('9007199254740991')).projection?.entity, { type: 'order', id: '9007199254740991' });
  assert.deepEqual(parseActionOutput(projection('"820982911946154508"')).projection?.entity, { type: 'order', id: '820982911946154508' });
  for (const id of ['820982911946154508', '820982911946154509', '1.5', '1e400', '4.9999999999999999', '1e2', '5.0', '-5E0', '-0']) {
    const check = checkContract(projection(id));
    assert.equal(!check.ok && check.field, 'projection.entity_id', id);
  }
  // Written in whole digits, with space around it or a repeated member (the last one counts, as JSON.parse keeps).
  assert.deepEqual(parseActionOutput('{"projection": {"entity_id": 7.5, "name":"risk","entity_type":"order", "entity_id" : -5 }}').projection?.entity, { type: 'order', id: '-5' });
  assert.equal(checkContract('{"projection":{"name":"risk","entity_type":"order","entity_id":5},"projection":{"name":"risk","entity_type":"order","entity_id":5.5}}').ok, false);
});

test('projection caps (DESIGN 6.5): name [a-z0-9_.-]{1,120}, entity_id, title ≤200, status ≤40; the exact cap passes, one past it fails naming the field', () => {
  const projection = (fields: Record<string, unknown>) => JSON.stringify({ projection: { name: 'risk', ...fields } });
  const atCap = parseActionOutput(projection({ name: 'a'.repeat(120), entity_type: 'order', entity_id: 'i'.repeat(200), title: 't'.repeat(200), status: 's'.repeat(40) })).projection;
  assert.deepEqual(
    { name: atCap?.name.length, id: atCap?.entity?.id.length, title: atCap?.title?.length, status: atCap?.status?.length },
    { name: 120, id: 200, title: 200, status: 40 },
  );
  assert.deepEqual(checkContract(projection({ name: 'order_risk.v2-eu' })), { ok: true }, 'every character of the name\'s charset');
  // Characters, as a person (and ajv's maxLength) counts them: an emoji is one, not two UTF-16 units.
  assert.deepEqual(checkContract(projection({ entity_type: 'order', entity_id: '😀'.repeat(200), title: '😀'.repeat(200), status: '😀'.repeat(40) })), { ok: true }, 'emoji at the caps');
  assert.deepEqual(checkContract(projection({ name: '...', entity_type: '.x', entity_id: '..x' })), { ok: true }, 'dots with more than a path segment\'s');

  const overCap: Array<[string, Record<string, unknown>, string]> = [
    ['a name of 121 characters', { name: 'a'.repeat(121) }, 'projection.name'],
    ['an uppercase name', { name: 'Risk' }, 'projection.name'],
    ['an empty name', { name: '' }, 'projection.name'],
    // Path segments URL clients resolve (`/projections/..` would read the organization).
    ['a name "."', { name: '.' }, 'projection.name'],
    ['a name ".."', { name: '..' }, 'projection.name'],
    ['an entity_type ".."', { entity_type: '..', entity_id: 'x' }, 'projection.entity_type'],
    ['an entity_id "."', { entity_type: 'order', entity_id: '.' }, 'projection.entity_id'],
    ['an entity_id ".."', { entity_type: 'order', entity_id: '..' }, 'projection.entity_id'],
    ['an entity_id of 201 characters', { entity_type: 'order', entity_id: 'i'.repeat(201) }, 'projection.entity_id'],
    // The key encoding escapes U+0000 and U+0001 only in strings under 64 characters: these two
    // shared one row (found by a probe), so no id holds a control character.
    ['a short entity_id holding U+0000', { entity_type: 'order', entity_id: `b\u0000${'z'.repeat(61)}` }, 'projection.entity_id'],
    ['a long entity_id holding U+0004 U+0000', { entity_type: 'order', entity_id: `b\u0004\u0000${'z'.repeat(61)}` }, 'projection.entity_id'],
    ['an entity_id holding a tab', { entity_type: 'order', entity_id: 'a\tb' }, 'projection.entity_id'],
    ['an entity_id holding DEL', { entity_type: 'order', entity_id: 'a\u007fb' }, 'projection.entity_id'],
    // 34 characters, 66 UTF-16 units: past the encoding's escaping (a status index key read back as another row's).
    ['a status of emoji holding U+0000', { status: `${'😀'.repeat(32)}\u0000x` }, 'projection.status'],
    ['a title of 201 characters', { title: 't'.repeat(201) }, 'projection.title'],
    ['a status of 41 characters', { status: 's'.repeat(41) }, 'projection.status'],
    ['a status of 41 emoji', { status: '😀'.repeat(41) }, 'projection.status'],
    // A member it does not have would be lost: camelCase or a typo wrote a row without it.
    ['an entityType member', { entityType: 'order', entityId: 'o-1' }, 'projection.entityType'],
    ['a colour member', { colour: 'red' }, 'projection.colour'],
  ];
  for (const [what, fields, field] of overCap) {
    const check = checkContract(projection(fields));
    assert.equal(check.ok, false, what);
    assert.equal(!check.ok && check.field, field, what);
    assert.ok(!check.ok && check.message.includes(field), `${what}: the message names ${field}: ${!check.ok && check.message}`);
  }
});

test('a "__proto__" key anywhere in the output fails the contract naming where (it could not be stored as given)', () => {
  for (const [output, at] of [['{"__proto__":{"admin":true}}', '__proto__'], ['{"a":[1,{"b":{"__proto__":1}}]}', 'a[1].b.__proto__'], ['[{"__proto__":null}]', '[0].__proto__']]) {
    const checked = checkContract(output as string);
    assert.equal(checked.ok, false, output);
    assert.equal(!checked.ok && checked.field, 'output');
    assert.match(!checked.ok ? checked.message : '', new RegExp(`at ${(at as string).replace(/[[\].]/g, '\\$&')}\\)`), output);
  }
  assert.deepEqual(parseActionOutput('{"proto":"__proto__","__proto":1}').document, { proto: '__proto__', __proto: 1 }, 'only that exact key');
});

test('a lone UTF-16 surrogate in the output fails the contract naming where; a paired one (an emoji) passes', () => {
  for (const [output, at] of [['{"name":"ok\\ud800"}', 'name'], ['{"a":["x",{"\\udc00":1}]}', 'a[1] (a member name)']]) {
    const checked = checkContract(output as string);
    assert.equal(checked.ok, false, output);
    assert.match(!checked.ok ? checked.message : '', new RegExp(`lone UTF-16 surrogate at ${(at as string).replace(/[[\]().]/g, '\\$&')},`), output);
  }
  assert.deepEqual(parseActionOutput('{"e":"\\ud83d\\ude00"}').document, { e: '😀' });
});

test('a number JSON.parse cannot keep (a whole number past ±2^53, or one that overflows) fails the contract naming it; fractions and exact ones pass', () => {
  for (const [output, literal] of [
    ['{"big":12345678901234567890}', '12345678901234567890'],
    ['{"projection":{"name":"p","data":{"n":[1,-9007199254740993]}}}', '-9007199254740993'],
    ['{"derived_event":{"type":"a.b","payload":{"n":1e400}}}', '1e400'],
    ['{"result":[9007199254740993.0]}', '9007199254740993.0'],
    ['{"result":[-12345678901234567e1]}', '-12345678901234567e1'],
    ['{"result":[9.007199254740993E15]}', '9.007199254740993E15'],
  ]) {
    const checked = checkContract(output as string);
    assert.equal(checked.ok, false, output);
    assert.equal(!checked.ok && checked.field, 'output');
    assert.match(!checked.ok ? checked.message : '', new RegExp(`number ${literal}, .*write it as a string`));
    assert.match(!checked.ok ? checked.message : '', literal === '1e400' ? /overflows a double/ : /a whole number must be within ±\(2\^53 − 1\), 9007199254740991/);
  }
  // 2^53 itself is past the bound the message names (it is what 2^53 + 1 would read as).
  const edge = checkContract('{"n":9007199254740992}');
  assert.match(!edge.ok ? edge.message : 'passed', /number 9007199254740992, which JSON.parse cannot keep exactly \(a whole number must be within ±\(2\^53 − 1\)/);
  const fine = '{"max":9007199254740991,"min":-9007199254740991,"dec":0.1000000000000000055511151231257827,"exp":1e20,"s":"12345678901234567890","esc":"\\\\","q":"a\\"12345678901234567890","big":[1e300,-1.5e300,9007199254740992.0,1.2345678901234567e-5,9.9999999999999992e+22]}';
  assert.equal(checkContract(fine).ok, true);
});

test('names the guest chose are echoed cut short: an error about a long member name or path stays small (it is kept on the run and sent live)', () => {
  const long = 'k'.repeat(200_000);
  const cases = [
    JSON.stringify({ derived_event: { type: 'a.b', payload: 1, [long]: 1 } }),
    JSON.stringify({ projection: { name: 'n', [long]: 1 } }),
    `{"${long}":{"__proto__":1}}`,
    `{"${long}":"\\ud800"}`,
    JSON.stringify({ derived_event: { type: 'a.b', payload: 1, [`${'e'.repeat(2030)}${'😀'.repeat(100)}`]: 1 } }),
  ];
  for (const output of cases) {
    assert.throws(() => parseActionOutput(output), (error: Error & { field?: string }) => {
      assert.ok(error.message.length <= 2049 && (error.field ?? '').length <= 2048, `${error.message.length} / ${(error.field ?? '').length}`);
      assert.equal(loneSurrogatePath([error.message, error.field]), undefined, 'no half of a surrogate pair');
      return true;
    });
  }
});
