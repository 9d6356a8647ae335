// A keyed business replay is made once for as long as its key's claim is live (the dedup window,
// counted from the replay), also when the event it replayed, older, has been pruned meanwhile: the
// retry learns of the replay it made instead of a 404.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

test('a keyed replay retried after its original was pruned answers with the replay it made', async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const rt = await startRuntime({ clock });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-pruned-replay');
    const base = '/organizations/acct-pruned-replay/events';
    assert.equal((await call(rt.url, 'POST', base, { token: key, json: { type: 't.x', payload: {}, id: 'orig' } })).status, 202);
    clock.advance(29 * DAY_MS);
    const replay = (sideEffects: string) => call(rt.url, 'POST', `${base}/orig/replay`, { token: key, json: { side_effects: sideEffects }, headers: { 'idempotency-key': 'K1' } });
    const first = await replay('skip');
    assert.equal(first.status, 202, first.text);
    clock.advance(DAY_MS + 1000);
    const { context } = rt.runtime;
    assert.deepEqual(await pruneHistory({ ledger: rt.runtime.ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS), { events: 1, runs: 0 });
    assert.equal((await call(rt.url, 'GET', `${base}/orig`, { token: key })).status, 404, 'the original is gone');
    const retry = await replay('skip');
    assert.deepEqual([retry.status, retry.body.event?.id, retry.headers.get('idempotent-replayed')], [202, first.body.event.id, 'true']);
    assert.equal((await replay('run')).body.error?.code, 'idempotency_key_reused', 'the other choice is still refused');
    const otherEnvironment = await call(rt.url, 'POST', `${base}/orig/replay?environment=sandbox`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'K1' } });
    assert.equal(otherEnvironment.status, 404, 'the key\'s replay is of the production event: in the sandbox there is none');
    const unkeyed = await call(rt.url, 'POST', `${base}/orig/replay`, { token: key, json: { side_effects: 'skip' } });
    assert.equal(unkeyed.status, 404, 'without the key, the original is simply gone');
  } finally {
    await rt.close();
  }
});
