// Replays larger than the backpressure limit: the page reader on its own, then over a real WebSocket:
// streamed as the client reads, every retained update once and in seq order, then live ones; a close ends it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import { MAX_REMEMBERED_GAPS, nextPage, REPLAY_PAGE_SIZE, sentSoFar, startReplay, wasSent, type SkippedSeqs } from '../../runtime/rooms/live-replay.ts';
import { MAX_BACKPRESSURE } from '../../runtime/rooms/live-socket.ts';
import { UpdateLog, type NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { createOrg } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';
import { LMDB_LEDGER } from '../helpers/ledgers.ts';

/** Retained per org; at ~1 KiB each, a replay of all of them is ~10x the backpressure limit. */
const RETAINED = 10_000;
const UPDATE_BYTES = 1000;

let rt: TestRuntime;
const keys = new Map<string, string>();
before(async () => {
  rt = await startRuntime({ args: ['--live-retention', String(RETAINED)] });
  for (const org of ['acct-backlog-url', 'acct-backlog-frame', 'acct-backlog-close']) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
});
after(async () => rt.close());

const update = (runId: string, errorBytes = 0): NewRunUpdate => ({
  run_id: runId, state: 'running', channel: 'orders', workflow_id: 'wf', event_id: 'evt', step_id: 's1', attempt: 1, at_ms: 1, error: 'e'.repeat(errorBytes), environment: 'production',
});

/** The production path: append in one durable transaction, then publish. */
async function commit(orgId: string, updates: NewRunUpdate[]): Promise<RunUpdate[]> {
  const { ledger, updateLog, rooms } = rt.runtime;
  const stored = await durably(ledger.root, ledger.root.transaction(() => updates.map((u) => updateLog.append(orgId, u))));
  rooms.publish(orgId, stored);
  return stored;
}

/** `count` updates of about `bytes` each, committed 1,000 per transaction. */
async function backlog(orgId: string, count: number, bytes: number): Promise<RunUpdate[]> {
  const stored: RunUpdate[] = [];
  for (let from = 0; from < count; from += 1000) {
    stored.push(...(await commit(orgId, Array.from({ length: Math.min(1000, count - from) }, (_, i) => update(`run-${from + i}`, bytes)))));
  }
  return stored;
}

const seqsOf = (client: LiveClient): number[] => client.updates().map((u) => u.seq);
/** For nextPage: only `seqs` were skipped by the seq order (their writes may still land). */
const skippedOnly = (...seqs: number[]): SkippedSeqs => ({
  isSkipped: (seq) => seqs.includes(seq),
  between: (after, upTo) => new Set(seqs.filter((seq) => seq > after && seq <= upTo)),
});
/** For nextPage: every entry in the log is durable. */
const durable = skippedOnly();

/** A log on an LMDB ledger keeping `retention` updates, after `count` appends to org 'org'; `ledger.close()` removes it. */
async function filledLog(retention: number, count: number, runOf: (i: number) => string, bytes: number) {
  const opened = LMDB_LEDGER.open();
  const log = new UpdateLog(opened.ledger, retention);
  await opened.ledger.root.transaction(() => {
    for (let i = 0; i < count; i++) log.append('org', update(runOf(i), bytes));
  });
  return { ledger: { close: opened.close, table: opened.ledger.openDatabase('live-updates') }, log };
}

test('a replay reads one page of the log at a time, about a byte budget, and is caught up only on a short page', async () => {
  const { ledger, log } = await filledLog(1000, 600, (i) => (i % 2 === 0 ? 'run-even' : 'run-odd'), 100);
  const all = startReplay({ environment: 'production', runId: '' }, 0, []);
  const first = nextPage(log, 'org', all, 600, Infinity, durable);
  assert.deepEqual([first.frames.length, all.cursor, first.caughtUp], [REPLAY_PAGE_SIZE, REPLAY_PAGE_SIZE, false]);
  const small = nextPage(log, 'org', all, 600, 1, durable);
  assert.deepEqual([small.frames.length, all.cursor, small.caughtUp], [1, REPLAY_PAGE_SIZE + 1, false], 'one frame when the budget is tiny');
  nextPage(log, 'org', all, 600, Infinity, durable);
  const last = nextPage(log, 'org', all, 600, Infinity, durable);
  assert.deepEqual([last.frames.length, last.caughtUp], [600 - 2 * REPLAY_PAGE_SIZE - 1, true]);

  // A Subscribe for one run interrupts a replay of all runs after 100 updates: those are not sent again.
  const interrupted = startReplay({ environment: 'production', runId: '' }, 0, []);
  interrupted.cursor = 100;
  const oneRun = startReplay({ environment: 'production', runId: 'run-even' }, 0, sentSoFar(interrupted));
  const rest = nextPage(log, 'org', oneRun, 600, Infinity, durable);
  assert.equal(rest.frames.length, 128 - 50, 'run-even updates 101..256 of the first page');
  await ledger.close();
});

test('a replay from 0 over a log that has dropped its oldest updates records no gaps for them: a Subscribe that interrupts it resends nothing it sent', async () => {
  const { ledger, log } = await filledLog(100, 300, () => 'run', 10);
  const replay = startReplay({ environment: 'production', runId: '' }, 0, []);
  const page = nextPage(log, 'org', replay, 300, Infinity, durable);
  assert.deepEqual([page.frames.length, replay.cursor, replay.gaps.size], [100, 300, 0]);
  const sent = sentSoFar(replay);
  assert.deepEqual([sent.length, sent[0]?.upTo, sent[0]?.missing.size], [1, 300, 0], 'seqs 1-200 were dropped by retention, not skipped while in flight');
  await ledger.close();
});

test('an entry the seq order skipped and has not published is not replayed yet: it stays a gap until it is', async () => {
  const { ledger, log } = await filledLog(100, 3, () => 'run', 10);
  const replay = startReplay({ environment: 'production', runId: '' }, 0, []);
  const page = nextPage(log, 'org', replay, 3, Infinity, skippedOnly(2));
  assert.equal(page.frames.length, 2, 'seqs 1 and 3');
  assert.deepEqual([replay.cursor, [...replay.gaps]], [3, [2]]);
  const sent = sentSoFar(replay);
  const at = (seq: number) => ({ seq, run_id: 'run', environment: 'production' }) as RunUpdate;
  assert.deepEqual([1, 2, 3].map((seq) => wasSent(sent, at(seq))), [true, false, true], 'a Subscribe meanwhile would not count seq 2 as sent');
  await ledger.close();
});

test('a replay over millions of seqs missing between two entries (a sandbox reset\'s) looks only at the skipped ones', async () => {
  const { ledger, log } = await filledLog(10_000_000, 2, () => 'run', 10);
  // An entry far past the others, as after a reset removed the sandbox's millions in between.
  const far = 5_000_000;
  await ledger.table.put(['org', far], { ...update('run', 10), seq: far, org_id: 'org' });
  let asked = 0;
  const skipped: SkippedSeqs = { isSkipped: (seq) => (asked++, seq === 1_234_567), between: (after, upTo) => new Set([1_234_567].filter((seq) => seq > after && seq <= upTo)) };
  const replay = startReplay({ environment: 'production', runId: '' }, 0, []);
  const page = nextPage(log, 'org', replay, far, Infinity, skipped);
  assert.deepEqual([page.frames.length, replay.cursor, [...replay.gaps]], [3, far, [1_234_567]]);
  assert.equal(asked, 3, 'asked of each entry, not of each missing seq');
  await ledger.close();
});

test('a replay that would have to wait for more seqs than it remembers (a long stretch of failed writes) stops before the first one past them', async () => {
  const { ledger, log } = await filledLog(10_000, MAX_REMEMBERED_GAPS + 10, () => 'run', 10);
  // Every seq from 2 on was skipped by the seq order: their writes may never be durable.
  const notDurable = Array.from({ length: MAX_REMEMBERED_GAPS + 9 }, (_, i) => i + 2);
  const replay = startReplay({ environment: 'production', runId: '' }, 0, []);
  const pages = [];
  for (let page = nextPage(log, 'org', replay, MAX_REMEMBERED_GAPS + 10, Infinity, skippedOnly(...notDurable)); ; page = nextPage(log, 'org', replay, MAX_REMEMBERED_GAPS + 10, Infinity, skippedOnly(...notDurable))) {
    pages.push(page);
    if (page.caughtUp || page.gapsFull === true) break;
  }
  const last = pages.at(-1)!;
  assert.equal(last.gapsFull, true);
  assert.deepEqual(pages.flatMap((page) => page.frames).length, 1, 'only seq 1 was sent: no update that may never be durable');
  assert.deepEqual([replay.gaps.size, replay.cursor], [MAX_REMEMBERED_GAPS, MAX_REMEMBERED_GAPS + 1], 'the cursor stops before the first seq it cannot remember');
  await ledger.close();
});

/** The close code once the socket closed, else undefined (read it at any time). */
function closeCode(client: LiveClient): () => number | undefined {
  let code: number | undefined;
  void client.closed.then((closed) => (code = closed.code));
  return () => code;
}

/** Waits until the client holds `count` updates, failing at once (with the close code) if it is closed first. */
async function receive(client: LiveClient, count: number, what: string): Promise<void> {
  const closed = closeCode(client);
  await client.waitFor(() => seqsOf(client).length >= count || closed() !== undefined, what, 60_000);
  assert.equal(closed(), undefined, `the socket was closed (code ${closed()}) after ${seqsOf(client).length} of ${count} updates`);
}

test('a client reconnecting with after_seq=0 over a backlog larger than the backpressure limit gets every retained update once, in seq order, then live ones', async () => {
  const org = 'acct-backlog-url';
  const retained = await backlog(org, RETAINED, UPDATE_BYTES);
  assert.ok(RETAINED * UPDATE_BYTES > 4 * MAX_BACKPRESSURE, 'a one-shot replay would exceed the limit');
  const client = await connectLive(rt.url, org, { query: `?token=${encodeURIComponent(keys.get(org)!)}&after_seq=0` });
  await receive(client, 1, 'the replay to begin');
  const [during] = await commit(org, [update('run-during')]);
  await receive(client, RETAINED + 1, 'the whole replay and the update published during it');
  const [live] = await commit(org, [update('run-live')]);
  await receive(client, RETAINED + 2, 'the live update after the replay');
  // The oldest was replayed before retention dropped it for `during`.
  assert.deepEqual(seqsOf(client), [...retained.map((u) => u.seq), during!.seq, live!.seq]);
  client.close();
});

test('a Subscribe with after_seq=0 over a backlog larger than the limit sends each update once: none the socket already got live, none published during the replay twice', async () => {
  const org = 'acct-backlog-frame';
  const retained = await backlog(org, RETAINED - 1, UPDATE_BYTES);
  const client = await connectLive(rt.url, org, { token: keys.get(org)! });
  const [early] = await commit(org, [update('run-early')]);
  await receive(client, 1, 'the live update');
  client.subscribe({ after_seq: 0 });
  await receive(client, 2, 'the replay to begin');
  const [during] = await commit(org, [update('run-during')]);
  await receive(client, RETAINED + 1, 'the whole replay and the update published during it');
  const [live] = await commit(org, [update('run-live')]);
  await receive(client, RETAINED + 2, 'the live update after the replay');
  // What went out live before the Subscribe stays ahead of the replay, which leaves it out.
  const expected = [early!.seq, ...retained.map((u) => u.seq), during!.seq, live!.seq];
  const received = seqsOf(client);
  assert.equal(new Set(received).size, received.length, 'no update twice');
  assert.deepEqual(received, expected);
  client.close();
});

test('a socket that closes mid-replay ends its replay; the rooms keep serving others', async () => {
  const org = 'acct-backlog-close';
  // 16 MB: more than the kernel's socket buffers hold for a reader that stopped.
  await backlog(org, 1000, 16 * 1024);
  const { rooms } = rt.runtime;
  const watcher = await connectLive(rt.url, org, { token: keys.get(org)! });
  const client = await connectLive(rt.url, org, { query: `?token=${encodeURIComponent(keys.get(org)!)}&after_seq=0` });
  (client.socket as unknown as { _socket: { pause(): void } })._socket.pause();
  assert.equal(rooms.replayingCount, 1, 'the paused client is still being replayed to');
  client.socket.terminate();
  await watcher.waitFor(() => rooms.replayingCount === 0 && rooms.subscriberCount === 1, 'the replay to end with its socket');
  const [live] = await commit(org, [update('run-after-close')]);
  await watcher.waitFor(() => seqsOf(watcher).includes(live!.seq), 'the live update');
  watcher.close();
});
