// History retention: events older than the retention go with their recordings and finished runs;
// an event stays while a run of it still has work to do or waits for a person, and newer ones stay.
// A caller-chosen API id stays taken after its event is gone (its runs' ids would come back), until a
// sandbox reset for sandbox ids; and a long prune lets requests in between its passes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-history';
const SECRET = `whsec_${Buffer.alloc(32, 4).toString('base64')}`;
const clock = new ManualClock(Date.UTC(2026, 9, 1, 12, 0, 0));
let rt: TestRuntime;
let key: string;
let receiver: Receiver;

before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  receiver = await startReceiver();
  receiver.script([{ status: 200 }]);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'in', secrets: [SECRET] } })).status, 201);
  const workflows: Array<[string, unknown[]]> = [
    ['done.x', [{ type: 'webhook', url: `${receiver.url}/ok` }]],
    ['wait.x', [{ type: 'delay', duration_ms: 30 * DAY_MS }]],
    ['fail.x', [{ type: 'webhook', url: `${receiver.url}/refuse` }]],
  ];
  for (const [trigger, steps] of workflows) {
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: trigger, trigger_event: trigger, steps } });
    assert.equal(made.status, 201, made.text);
  }
});
after(async () => {
  await rt.close();
  await receiver.close();
});

const sendApi = async (id: string, type: string) =>
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, payload: {}, id } })).status, 202);

const reactions = async (eventId: string): Promise<Array<{ run_id: string; state: string }> | 'gone'> => {
  const read = await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key });
  return read.status === 404 ? 'gone' : read.body.reactions;
};

test('old events whose runs all finished go with their recording and runs; unfinished, failed and newer ones stay', async () => {
  receiver.script([{ status: 200 }]);
  const body = '{"type":"done.x"}';
  const hooked = await call(rt.url, 'POST', `/hooks/${ORG}/in`, { body, headers: signStandard(SECRET, 'msg-old', Math.floor(clock.now() / 1000), body) });
  assert.equal(hooked.status, 204, hooked.text);
  const oldDone = hooked.headers.get('sluice-event-id')!;
  await sendApi('old-wait', 'wait.x');
  await sendApi('old-lonely', 'nobody.listens');
  const stateOf = async (eventId: string): Promise<string | undefined> => {
    const found = await reactions(eventId);
    return found === 'gone' ? 'gone' : found[0]?.state;
  };
  await eventually('the old runs to settle', async () => `${await stateOf(oldDone)} ${await stateOf('old-wait')}`, (states) => states === 'completed delaying');
  receiver.script([{ status: 400 }]);
  await sendApi('old-fail', 'fail.x');
  await eventually('the refused run to fail', () => stateOf('old-fail'), (state) => state === 'failed');
  const [doneRun] = (await reactions(oldDone)) as Array<{ run_id: string }>;

  clock.advance(31 * DAY_MS);
  await sendApi('new-lonely', 'nobody.listens');

  const { ledger, context } = rt.runtime;
  // Passes of 2 events: kept events at the front of a pass must not stop the next one.
  assert.deepEqual(await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 2), { events: 2, runs: 1 });
  assert.equal(await reactions(oldDone), 'gone');
  assert.equal(await reactions('old-lonely'), 'gone');
  assert.equal(ledger.recordings.get([ORG, oldDone]), undefined, 'the recording went with its event');
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/runs/${doneRun!.run_id}`, { token: key })).status, 404, 'and the finished run');
  for (const kept of ['old-wait', 'old-fail', 'new-lonely']) assert.notEqual(await reactions(kept), 'gone', kept);
  assert.deepEqual(((await call(rt.url, 'GET', `/organizations/${ORG}/runs?limit=50`, { token: key })).body.runs as Array<{ state: string }>).map((r) => r.state).sort(), ['delaying', 'failed']);
  assert.deepEqual(await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 2), { events: 0, runs: 0 }, 'nothing more');
});

test('a pruned API event id is refused when sent again (409), a sandbox one again after a sandbox reset', async () => {
  const { ledger, context } = rt.runtime;
  const prune = () => pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS);
  const send = (id: string, environment: string) => call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'nobody.listens', payload: { id }, id, environment } });
  assert.equal((await send('reused-prod', 'production')).status, 202);
  assert.equal((await send('reused-sandbox', 'sandbox')).status, 202);
  clock.advance(31 * DAY_MS);
  assert.deepEqual(await prune(), { events: 3, runs: 0 }, 'these two, and the first test\'s new-lonely, now old too');
  // Ids are unique across both environments, so each stays taken in the other environment too.
  for (const [id, environment] of [['reused-prod', 'production'], ['reused-sandbox', 'sandbox'], ['reused-prod', 'sandbox'], ['reused-sandbox', 'production']]) {
    const again = await send(id!, environment!);
    assert.equal(again.status, 409, `${id} in ${environment}: ${again.text}`);
    assert.equal(again.body.error.code, 'duplicate_event');
  }
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
  assert.equal((await send('reused-sandbox', 'sandbox')).status, 202, 'a new sandbox generation: its runs get new ids');
  assert.equal((await send('reused-prod', 'production')).status, 409, 'production ids stay taken');
});

test('a prune that finds only events to keep still lets other work run between its passes', async () => {
  const { ledger, context } = rt.runtime;
  // Every old event left here is kept (a delaying run, a failed run): passes of 1 write nothing.
  let ranBetween = false;
  const pruning = pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 1);
  setImmediate(() => {
    ranBetween = true;
  });
  assert.deepEqual(await pruning, { events: 0, runs: 0 });
  assert.equal(ranBetween, true, 'a macrotask ran before the prune finished');
});

test('a time index entry that names no event (gone, or its id now names a later event) is removed by the next prune', async () => {
  const { ledger } = rt.runtime;
  const old = clock.now() - 40 * DAY_MS;
  const orphan = [ORG, 'production', old, 'evt-orphan'];
  await sendApi('evt-replaced', 'other.x');
  const replaced = [ORG, 'production', old, 'evt-replaced'];
  await ledger.root.transaction(() => {
    ledger.eventsByTime.put(orphan, null);
    ledger.eventsByTime.put(replaced, null);
  });
  await pruneHistory({ ledger, events: rt.runtime.context.events, runs: rt.runtime.context.runs }, clock.now(), 30 * DAY_MS);
  assert.equal(ledger.eventsByTime.doesExist(orphan), false);
  assert.equal(ledger.eventsByTime.doesExist(replaced), false);
  assert.notEqual(await reactions('evt-replaced'), 'gone', 'the event its id names now (newer) stays');
});

test('a prune told to stop ends after the pass in progress; the next one goes on from there', async () => {
  for (const id of ['stop-1', 'stop-2', 'stop-3']) await sendApi(id, 'nobody.listens');
  clock.advance(31 * DAY_MS);
  const { ledger, context } = rt.runtime;
  const stopped = new AbortController();
  stopped.abort();
  const first = await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 1, stopped.signal);
  assert.ok(first.events <= 1, `one pass of one event at most (${first.events})`);
  const left = async (): Promise<number> => (await Promise.all(['stop-1', 'stop-2', 'stop-3'].map(reactions))).filter((found) => found !== 'gone').length;
  assert.ok((await left()) >= 2, 'the rest was left for the next prune');
  await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 1);
  assert.equal(await left(), 0);
});

test('a pass counts an event\'s runs as work: an event with three runs fills a pass of 2 alone', async () => {
  receiver.script([{ status: 200 }]);
  const org = 'acct-fan-history';
  const fanKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: fanKey, json });
  const runsOf = async (eventId: string): Promise<Array<{ state: string }> | 'gone'> => {
    const read = await call(rt.url, 'GET', `/organizations/${org}/events/${eventId}`, { token: fanKey });
    return read.status === 404 ? 'gone' : read.body.reactions;
  };
  for (const name of ['fan-a', 'fan-b', 'fan-c']) {
    assert.equal((await post('/workflows', { name, trigger_event: 'fan.x', steps: [{ type: 'webhook', url: `${receiver.url}/ok` }] })).status, 201);
  }
  assert.equal((await post('/events', { type: 'fan.x', payload: {}, id: 'fan-1' })).status, 202);
  await eventually('its three runs complete', () => runsOf('fan-1'), (runs) => runs !== 'gone' && runs.length === 3 && runs.every((run) => run.state === 'completed'));
  clock.advance(1);
  assert.equal((await post('/events', { type: 'nobody.listens', payload: {}, id: 'fan-2-lonely' })).status, 202);
  clock.advance(31 * DAY_MS);
  const { ledger, context } = rt.runtime;
  // The org sorts before the earlier tests' (whose kept events would fill passes of their own): its events come first.
  const stopped = new AbortController();
  stopped.abort();
  const first = await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 2, stopped.signal);
  assert.deepEqual(first, { events: 1, runs: 3 }, 'the pass that took fan-1 took nothing else');
  assert.notEqual(await runsOf('fan-2-lonely'), 'gone', 'left for the next pass');
  await pruneHistory({ ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 2);
  assert.equal(await runsOf('fan-2-lonely'), 'gone');
});

test('a prune reads the org list before its first pass: no range of the ledger stays open while it waits on its writes', async () => {
  for (const id of ['open-1', 'open-2']) await sendApi(id, 'nobody.listens');
  clock.advance(31 * DAY_MS);
  const { ledger, context } = rt.runtime;
  // LMDB reuses no page freed after the oldest read snapshot still open: a lazy org list kept one
  // through every pass, so the prune grew the file instead of making room in it.
  let open = false;
  const orgs = Object.create(ledger.orgs) as typeof ledger.orgs;
  orgs.getKeys = (options) => {
    const keys = ledger.orgs.getKeys(options);
    return (function* () {
      open = true;
      try {
        yield* keys;
      } finally {
        open = false;
      }
    })();
  };
  let seenOpen = 0;
  let looking = true;
  const look = (): void => {
    if (open) seenOpen++;
    if (looking) setImmediate(look);
  };
  look();
  const pruned = await pruneHistory({ ledger: { ...ledger, orgs }, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS, 1);
  looking = false;
  assert.ok(pruned.events >= 2, `pruned ${JSON.stringify(pruned)}`);
  assert.equal(seenOpen, 0, 'the org list was open between passes');
});
