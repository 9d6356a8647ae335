// Reading events back never parses their payloads on the event loop: list and get answers write the
// stored text, a business replay copies it, and the retention prune compares index entries with
// the records as stored. (Each parsed every payload: a page of two 8 MiB events held every tenant
// for seconds, and a replay of one ~0.4 s.)
// Counted on the real runtime by watching JSON.parse for the payload's text.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-payload-reads';
const clock = new ManualClock(Date.UTC(2026, 11, 3, 12, 0, 0));
/** Long enough that no other text the runtime parses is this size. */
const BLOB = 'p'.repeat(300_000);
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'big.x', id: 'big-1', payload: { blob: BLOB } } });
  assert.equal(sent.status, 202, sent.text);
});
after(() => rt.close());

/** Runs `work` counting the JSON.parse calls on texts at least as long as the payload. */
async function payloadParses<T>(work: () => Promise<T>): Promise<{ parses: number; result: T }> {
  const parse = JSON.parse;
  let parses = 0;
  JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
    if (typeof text === 'string' && text.length >= BLOB.length) parses += 1;
    return parse(text, reviver);
  }) as typeof JSON.parse;
  try {
    const result = await work();
    return { parses, result };
  } finally {
    JSON.parse = parse;
  }
}

test('a list page and an event read write the payload as stored without parsing it', async () => {
  const listed = await payloadParses(async () => (await fetch(`${rt.url}/organizations/${ORG}/events?type=big.x`, { headers: { authorization: `Bearer ${key}` } })).text());
  assert.equal(listed.parses, 0);
  assert.ok(listed.result.includes(`{"blob":"${BLOB}"}`), 'the payload is in the page');
  const read = await payloadParses(async () => (await fetch(`${rt.url}/organizations/${ORG}/events/big-1`, { headers: { authorization: `Bearer ${key}` } })).text());
  assert.equal(read.parses, 0);
  assert.ok(read.result.includes(`{"blob":"${BLOB}"}`), 'the payload is in the answer');
});

test('a business replay carries the payload as received without parsing it, keyed or not', async () => {
  for (const keyed of [{}, { 'idempotency-key': 'replay-big-1' }]) {
    const made = await payloadParses(async () =>
      (await fetch(`${rt.url}/organizations/${ORG}/events/big-1/replay`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...keyed },
        body: JSON.stringify({ side_effects: 'skip' }),
      })).text());
    assert.equal(made.parses, 0, JSON.stringify(keyed));
    const replayId = (JSON.parse(made.result) as { event: { id: string } }).event.id;
    const stored = await call(rt.url, 'GET', `/organizations/${ORG}/events/${replayId}`, { token: key });
    assert.equal(stored.body.event.payload.blob, BLOB);
  }
});

test('the retention prune removes an old event without parsing its payload', async () => {
  clock.advance(31 * DAY_MS);
  const { context, ledger } = rt.runtime;
  const pruned = await payloadParses(() => pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS));
  assert.equal(pruned.parses, 0);
  assert.deepEqual(pruned.result, { events: 3, runs: 0 }, 'the event and its two replays');
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/events/big-1`, { token: key })).status, 404);
});
