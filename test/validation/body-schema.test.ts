// What a body that fails its schema is told: a misspelled required field is named as the unknown
// field it is, enums list their values, and ajv's wording reads as a sentence about the field.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError } from '../../runtime/errors.ts';
import { createBodyParser } from '../../runtime/validation/body-schema.ts';

const parse = createBodyParser<unknown>({
  type: 'object',
  additionalProperties: false,
  required: ['type'],
  minProperties: 1,
  properties: {
    type: { type: 'string' },
    plan: { enum: ['starter', 'pro'] },
    tags: { type: 'array', uniqueItems: true, items: { type: 'string' } },
    steps: {
      type: 'array',
      items: { type: 'object', additionalProperties: false, required: ['url'], properties: { url: { type: 'string' }, id: { type: 'string' } } },
    },
  },
});

function refusal(body: unknown): { code: string; field: string | undefined; message: string } {
  try {
    parse(body);
  } catch (error) {
    assert.ok(error instanceof InputError, String(error));
    return { code: error.code, field: error.field, message: error.message };
  }
  return assert.fail(`accepted ${JSON.stringify(body)}`);
}

test('a made-up field name is echoed cut to 64 characters; a key refused by propertyNames is named in brackets', () => {
  const long = 'q'.repeat(100_000);
  const unknown = refusal({ type: 'a', [long]: 1 });
  assert.deepEqual([unknown.code, unknown.field], ['unknown_field', 'q'.repeat(64)]);
  assert.ok(unknown.message.length < 120, String(unknown.message.length));
  const misspelled = refusal({ [long]: 1 });
  assert.equal(misspelled.field, 'q'.repeat(64));
  // Never half an emoji: the cut falls before a pair it would split.
  const emoji = refusal({ type: 'a', [`${'a'.repeat(63)}😀tail`]: 1 });
  assert.equal(emoji.field, 'a'.repeat(63));
  const keyed = createBodyParser<unknown>({ type: 'object', properties: { event_types: { type: 'object', propertyNames: { pattern: '^[a-z.]+$' } } } });
  assert.throws(() => keyed({ event_types: { 'ok.type': {}, 'bad type!': {} } }), (error: InputError) => error.field === 'event_types["bad type!"]' && error.message.includes('"bad type!"'));
});

test('a misspelled required field is named as unknown, with the field it probably meant', () => {
  assert.deepEqual(refusal({ typ: 'a.b' }), { code: 'unknown_field', field: 'typ', message: 'Field "typ" is not a known field (and "type" is required: is it misspelled?).' });
  const nested = refusal({ type: 'a', steps: [{ url: 'x' }, { ulr: 'y' }] });
  assert.deepEqual([nested.code, nested.field], ['unknown_field', 'steps[1].ulr']);
  assert.match(nested.message, /"steps\[1\]\.url" is required/);
  assert.deepEqual(refusal({ plan: 'pro' }), { code: 'invalid_request', field: 'type', message: 'Field "type" is required.' }, 'only missing: says so');
});

test('enums list their values; type and property-count errors read as sentences', () => {
  assert.deepEqual(refusal({ type: 'a', plan: 'gold' }), { code: 'invalid_request', field: 'plan', message: 'Field "plan" must be one of "starter", "pro".' });
  assert.equal(refusal([]).message, 'The request body must be an object.');
  assert.equal(refusal({ type: 5 }).message, 'Field "type" must be a string.');
  assert.equal(refusal({ type: 'a', steps: {} }).message, 'Field "steps" must be an array.');
});

test('an update naming no field is told to name one', () => {
  const update = createBodyParser<unknown>({ type: 'object', minProperties: 1, additionalProperties: false, properties: { name: { type: 'string' } } });
  assert.throws(() => update({}), (error: unknown) => error instanceof InputError && error.message === 'The request body must name at least one field.');
});

test('a list that must not repeat itself names the entries that do, in words, not in ajv\'s template', () => {
  const repeated = refusal({ type: 'a', tags: ['x', 'y', 'x'] });
  assert.equal(repeated.message, 'Field "tags" must not list the same value twice (entries 0 and 2, counted from 0).');
  assert.doesNotMatch(repeated.message, /##/);
});
