// Payload checks against customer schemas run in the checking thread with a deadline: a check that
// would take seconds is refused (422) at the deadline while the event loop keeps turning, the next
// check runs on a fresh thread, orgs take turns, and an `ordered` check of a type without a schema
// still waits behind its org's earlier checks.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError } from '../../runtime/errors.ts';
import { SchemaChecks } from '../../runtime/sources/schema-checks.ts';

const DEADLINE_MS = 300;
const DEADLINES = { checkMs: DEADLINE_MS, compileMs: DEADLINE_MS };

/** A schema within every write-time cap whose check costs items x branches: seconds for these payloads. */
const costly = { type: 'object', properties: { a: { type: 'array', items: { anyOf: Array.from({ length: 1500 }, (_, i) => ({ const: `v${i}` })) } } } };
const costlyPayload = JSON.stringify({ a: Array.from({ length: 20_000 }, () => 'v1499') });
const simple = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } };

const declarer = (orgId: string, eventTypes: Record<string, object>) => ({ org_id: orgId, name: 'in', updated_at: '2026-12-01T00:00:00.000Z', event_types: eventTypes });

test('a check past the deadline is refused while the event loop turns; the next check runs on a new thread', async () => {
  // Compiling gets time to spare (the costly schema compiles in 2-4 s, and a fresh thread's first
  // compile of the simple one ran past 300 ms on a loaded machine): the deadline met is the check's.
  const checks = new SchemaChecks({ checkMs: DEADLINE_MS, compileMs: 60_000 });
  try {
    let turns = 0;
    const ticking = setInterval(() => turns++, 10);
    const slow = await checks.check(declarer('acct-a', { 'x.y': costly }), 'x.y', costlyPayload)!.catch((error: unknown) => error);
    clearInterval(ticking);
    assert.ok(slow instanceof InputError);
    assert.deepEqual([slow.status, slow.code, slow.field], [422, 'schema_check_too_slow', 'payload']);
    assert.match(slow.message, new RegExp(`schema for "x.y" took longer than ${DEADLINE_MS} ms; nothing was stored`));
    assert.ok(turns >= 5, `the event loop kept turning during the check (${turns} timer turns)`);

    await checks.check(declarer('acct-a', { 'x.y': simple }), 'x.y', '{"id":"a-1"}');
    const refused = await checks.check(declarer('acct-a', { 'x.y': simple }), 'x.y', '{"id":7}')!.catch((error: unknown) => error);
    assert.ok(refused instanceof InputError);
    assert.deepEqual([refused.code, refused.field], ['schema_validation_failed', 'payload.id']);
    assert.equal(checks.check(declarer('acct-a', { 'x.y': simple }), 'other.type', '{}'), undefined, 'a type without a schema is not checked');
  } finally {
    await checks.close();
  }
});

test('orgs take turns: one org\'s slow checks hold another\'s back by at most one; ordered checks keep their org\'s order', async () => {
  // Compiling gets time to spare, as above: the other org's check follows a slow one that ended its
  // thread, and its first compile on a fresh thread once ran past 300 ms on a loaded machine.
  const checks = new SchemaChecks({ checkMs: DEADLINE_MS, compileMs: 60_000 });
  try {
    const settled: string[] = [];
    const note = (name: string) => (promise: Promise<void> | undefined): Promise<void> =>
      (promise ?? Promise.resolve()).then(() => void settled.push(`${name} passed`), () => void settled.push(`${name} refused`));
    const slowOrg = declarer('acct-slow', { 'x.y': costly });
    const otherOrg = declarer('acct-other', { 'x.y': simple });
    const all = [
      note('slow-1')(checks.check(slowOrg, 'x.y', costlyPayload)),
      note('slow-2')(checks.check(slowOrg, 'x.y', costlyPayload)),
      // No schema for this type, but ordered: it waits for the org's two checks before it.
      note('slow-unchecked')(checks.check(slowOrg, 'no.schema', '{}', true)),
      note('other-1')(checks.check(otherOrg, 'x.y', '{"id":"b"}')),
    ];
    await Promise.all(all);
    assert.deepEqual(settled, ['slow-1 refused', 'other-1 passed', 'slow-2 refused', 'slow-unchecked passed']);
  } finally {
    await checks.close();
  }
});

/** Many event type schemas whose compiling takes a while (ajv generates code for each property). */
const manySchemas = (count: number): Record<string, object> =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`t.${i}`, { type: 'object', properties: Object.fromEntries(Array.from({ length: 120 }, (_, j) => [`p${j}`, { type: 'string', minLength: 1, maxLength: 64 }])) }]));

test('a write\'s schemas compile in the thread: a bad one is refused naming its type, and one past the deadline is refused as too slow', async () => {
  const compiles = new SchemaChecks(DEADLINES);
  try {
    // The first compile also starts the thread and loads ajv, which on a loaded machine can take
    // past the 300 ms deadline by itself: tried until the thread is warm (the deadline is the test's
    // subject below, not here).
    for (let tries = 1; ; tries += 1) {
      const warm = await compiles.compile('acct-a', { 'ok.type': simple }).then(() => true, (error: unknown) => {
        if (tries >= 5 || !(error instanceof InputError) || error.code !== 'schema_compile_too_slow') throw error;
        return false;
      });
      if (warm) break;
    }
    const bad = await compiles.compile('acct-a', { 'ok.type': simple, 'bad.type': { type: 'no-such-type' } }).catch((error: unknown) => error);
    assert.ok(bad instanceof InputError);
    assert.deepEqual([bad.status, bad.code, bad.field], [400, 'invalid_event_schema', 'event_types.bad.type']);
    const slow = await compiles.compile('acct-a', manySchemas(200)).catch((error: unknown) => error);
    assert.ok(slow instanceof InputError);
    assert.deepEqual([slow.status, slow.code, slow.field], [400, 'schema_compile_too_slow', 'event_types']);
    assert.match(slow.message, /Compiling these event type schemas took longer than 300 ms; nothing was saved/);
  } finally {
    await compiles.close();
  }
});

test('compiling a large schema has its own deadline: one that takes longer than a check may still checks payloads', async () => {
  const checks = new SchemaChecks({ checkMs: DEADLINE_MS, compileMs: 30_000 });
  try {
    // 3,000 properties with a few keywords each: compiles in about a second, checks in a moment.
    const large = { type: 'object', properties: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`f${i}`, { type: 'string', minLength: 1, maxLength: 64, format: 'email' }])) };
    await checks.check(declarer('acct-a', { 'big.schema': large }), 'big.schema', '{"f0":"a@example.com"}');
    const refused = await checks.check(declarer('acct-a', { 'big.schema': large }), 'big.schema', '{"f0":"not an email"}')!.catch((error: unknown) => error);
    assert.ok(refused instanceof InputError);
    assert.equal(refused.code, 'schema_validation_failed', 'compiled once, checked again');
  } finally {
    await checks.close();
  }
});

/** A 300-value `anyOf` for array items: compiles in moments, costs about 0.1 ms an item. */
const medium = { type: 'object', properties: { a: { type: 'array', items: { anyOf: Array.from({ length: 300 }, (_, i) => ({ const: `v${i}` })) } } } };
const mediumPayload = (items: number): string => JSON.stringify({ a: Array.from({ length: items }, () => 'v299') });

/**
 * Asks for a check in the timers' turn of the loop, and holds the loop for `busyMs` in the same
 * turn's check phase (another tenant's work); answers 'passed' or the refusal's code and message.
 */
const checkWhileBusy = (checks: SchemaChecks, payload: string, busyMs: number): Promise<string> =>
  new Promise<string>((resolve) =>
    setTimeout(() => {
      checks.check(declarer('acct-a', { 'x.y': medium }), 'x.y', payload)!.then(() => resolve('passed'), (error: { code: string; message: string }) => resolve(`${error.code}: ${error.message}`));
      setImmediate(() => {
        const until = performance.now() + busyMs;
        while (performance.now() < until);
      });
    }, 10),
  );

/** On a fresh SchemaChecks: compiles `medium` by a check of `warmItems`, then answers checkWhileBusy of `items`. */
async function busyCheckAfterCompile(deadlines: { checkMs: number; compileMs: number }, warmItems: number, items: number, busyMs: number): Promise<string> {
  const checks = new SchemaChecks(deadlines);
  try {
    await checks.check(declarer('acct-a', { 'x.y': medium }), 'x.y', mediumPayload(warmItems));
    return await checkWhileBusy(checks, mediumPayload(items), busyMs);
  } finally {
    await checks.close();
  }
}

test('an answer that came in time is taken even when the event loop was busy past the deadline', async () => {
  // Deadlines with room for a loaded machine; the loop is held for twice as long.
  const deadlineMs = 1000;
  // A check of some milliseconds, its schema compiled beforehand. The thread answers while the
  // loop is held past both deadlines, but the deadline's timer comes up in the next turn before
  // the answer is read.
  assert.equal(await busyCheckAfterCompile({ checkMs: deadlineMs, compileMs: deadlineMs }, 200, 200, 2 * deadlineMs), 'passed');
});

test('a compile deadline that passed behind a busy loop does not refuse a check that compiled in time and is still within its own', async () => {
  // A compile deadline with room for a loaded machine; the loop is held for twice as long.
  const compileMs = 1000;
  // Compiled beforehand (a check of 1 item), then a check of a few seconds. The thread says
  // `compiled` at once; the compile deadline's give-up, queued when its timer fired behind the
  // busy loop, must see that the check now runs on its own deadline.
  assert.equal(await busyCheckAfterCompile({ checkMs: 20_000, compileMs }, 1, 30_000, 2 * compileMs), 'passed');
});

test('close refuses the checks waiting and running, and later ones, as retryable', async () => {
  const checks = new SchemaChecks(DEADLINES);
  const waiting = [checks.check(declarer('acct-a', { 'x.y': costly }), 'x.y', costlyPayload)!, checks.check(declarer('acct-b', { 'x.y': simple }), 'x.y', '{"id":"b"}')!];
  const outcomes = Promise.allSettled(waiting);
  await checks.close();
  for (const outcome of await outcomes) {
    assert.equal(outcome.status, 'rejected');
    assert.deepEqual([(outcome.reason as { status: number }).status, (outcome.reason as { code: string }).code], [503, 'stopping']);
  }
  await assert.rejects(checks.check(declarer('acct-a', { 'x.y': simple }), 'x.y', '{"id":"late"}')!, (error: unknown) => (error as { code: string }).code === 'stopping');
});
