// The live-update log across restarts, on every ledger (LMDB and memory): the next seq follows the highest one on disk
// even when the counter written last is lower (batches and transactions commit out of order), and a changed retention
// neither hides what an earlier one dropped nor keeps what the new one would not.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { nextPage, startReplay } from '../../runtime/rooms/live-replay.ts';
import { UpdateLog, type NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const update = (runId: string): NewRunUpdate => ({
  run_id: runId, state: 'completed', channel: '', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: '', environment: 'production',
});

for (const kind of LEDGER_KINDS) describe(`update log (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  let ledger: Ledger;
  before(() => {
    opened = kind.open();
    ledger = opened.ledger;
  });
  after(() => opened.close());

  test('a restarted log continues after the highest stored seq, not after a lagging counter', async () => {
    const first = new UpdateLog(ledger, 100);
    for (const runId of ['run_1', 'run_2', 'run_3']) await ledger.root.transaction(() => first.append('org_a', update(runId)));
    // As if a transaction that took seq 2 committed after a batch that took seq 3: the counter says 2.
    await ledger.openDatabase('live-seq').put(['org_a'], 2);

    const restarted = new UpdateLog(ledger, 100);
    assert.equal(restarted.lastSeq('org_a'), 3);
    const next = await ledger.root.transaction(() => restarted.append('org_a', update('run_4')));
    assert.equal(next.seq, 4);
    assert.deepEqual(restarted.range('org_a', 0, 4).map((u) => u.run_id), ['run_1', 'run_2', 'run_3', 'run_4'], 'nothing was overwritten');
    assert.equal(restarted.lastSeq('org_b'), 0, 'another org starts at 0');
  });

  test("forgetOrg lets go of the seqs handed out to a removed org: the next one is worked out from disk again", () => {
    const log = new UpdateLog(ledger, 100);
    assert.deepEqual([log.reserve('org_gone', update('run_1')).seq, log.reserve('org_gone', update('run_2')).seq], [1, 2], 'handed out, never stored');
    assert.equal(log.firstIssued('org_gone'), 1);
    log.forgetOrg('org_gone');
    assert.equal(log.reserve('org_gone', update('run_3')).seq, 1, 'nothing of the org is remembered: disk holds no seq');
  });

  test('range reads one page at most when given a limit, oldest first', async () => {
    const log = new UpdateLog(ledger, 100);
    await ledger.root.transaction(() => ['run_1', 'run_2', 'run_3', 'run_4'].forEach((runId) => log.append('org_p', update(runId))));
    assert.deepEqual(log.range('org_p', 1, 4, 2).map((u) => u.seq), [2, 3]);
    assert.deepEqual(log.range('org_p', 3, 4, 2).map((u) => u.seq), [4]);
    assert.deepEqual(log.range('org_p', 0, 4).map((u) => u.seq), [1, 2, 3, 4]);
  });

  test('a sandbox reset that removes the newest update while the counter lags keeps that seq from being handed out again', async () => {
    const log = new UpdateLog(ledger, 100);
    await ledger.root.transaction(() => log.append('org_s', update('run_1')));
    await ledger.root.transaction(() => log.append('org_s', { ...update('run_2'), environment: 'sandbox' }));
    // As if the transaction that took seq 1 committed after the one that took seq 2: the counter says 1.
    await ledger.openDatabase('live-seq').put(['org_s'], 1);
    assert.equal(await ledger.root.transaction(() => log.removeEnvironment('org_s', 'sandbox')), 3, 'the reset reserves the seq after the newest as its mark');
    assert.equal(log.resetSeq('org_s', 'sandbox'), 2);
    const restarted = new UpdateLog(ledger, 100);
    assert.equal(restarted.lastSeq('org_s'), 3);
    assert.equal((await ledger.root.transaction(() => restarted.append('org_s', update('run_3')))).seq, 4, 'a client that saw seq 2 misses nothing, and the mark is not handed out again');
  });

  test('a reset\'s mark is not handed out again after a restart when an update reserved below it commits after the reset', async () => {
    const log = new UpdateLog(ledger, 100);
    await ledger.root.transaction(() => log.append('org_m', update('run_1')));
    await ledger.root.transaction(() => log.append('org_m', { ...update('run_2'), environment: 'sandbox' }));
    // A production transition reserved seq 3 in a batch queued before the reset's transaction ran...
    const late = log.reserve('org_m', update('run_3'));
    const mark = await ledger.root.transaction(() => log.removeEnvironment('org_m', 'sandbox'));
    assert.equal(mark, 4);
    // ...and committed after it: the counter on disk is 3 again, below the mark clients may have heard.
    await ledger.root.transaction(() => log.store('org_m', late));
    assert.equal(await ledger.openDatabase('live-seq').get(['org_m']), 3);
    const restarted = new UpdateLog(ledger, 100);
    assert.equal(restarted.lastSeq('org_m'), 4);
    assert.equal((await ledger.root.transaction(() => restarted.append('org_m', update('run_4')))).seq, 5, 'a client resuming from the mark hears the next update');
  });

  test('the counter still wins when the newest updates were removed (sandbox reset)', async () => {
    const log = new UpdateLog(ledger, 100);
    await ledger.root.transaction(() => log.append('org_c', { ...update('run_1'), environment: 'sandbox' }));
    await ledger.root.transaction(() => log.removeEnvironment('org_c', 'sandbox'));
    assert.equal(new UpdateLog(ledger, 100).lastSeq('org_c'), 2, 'the removed seq 1 and the mark 2');
  });

  test('a raised retention still reports what the smaller one dropped; a lowered one removes what it would not keep', async () => {
    const small = new UpdateLog(ledger, 3);
    await small.adoptRetention();
    for (let i = 1; i <= 10; i++) await ledger.root.transaction(() => small.append('org_r', update(`run_${i}`)));
    assert.equal(small.oldestRetained('org_r'), 8);

    const raised = new UpdateLog(ledger, 100);
    await raised.adoptRetention();
    assert.equal(raised.oldestRetained('org_r'), 8, 'seqs 1-7 are gone for good: a replay after 0-6 must be refused');
    assert.equal(raised.oldestRetained('org_none'), 1, 'an org with no updates loses nothing');
    await ledger.root.transaction(() => raised.append('org_r', update('run_11')));
    assert.deepEqual(raised.range('org_r', 0, 11).map((u) => u.seq), [8, 9, 10, 11]);

    const lowered = new UpdateLog(ledger, 2);
    await lowered.adoptRetention();
    assert.deepEqual(lowered.range('org_r', 0, 11).map((u) => u.seq), [10, 11], 'the updates beyond the new retention are removed at once');
    assert.equal(lowered.oldestRetained('org_r'), 10);

    const again = new UpdateLog(ledger, 2);
    await again.adoptRetention();
    assert.deepEqual(again.range('org_r', 0, 11).map((u) => u.seq), [10, 11], 'the same retention changes nothing');
  });

  test('trim removes what a lowered retention left in transactions of its batch size, each durable before the next', async () => {
    const log = new UpdateLog(ledger, 100);
    for (let i = 1; i <= 10; i++) await ledger.root.transaction(() => log.append('org_batch', update(`run_${i}`)));
    const lowered = new UpdateLog(ledger, 2);
    const { root } = ledger;
    const sizes: number[] = [];
    const table = ledger.openDatabase('live-updates');
    const counted = { ...root, transaction: <T>(body: () => T) => root.transaction(() => {
      const before = [...table.getKeys({ start: ['org_batch', 0], end: ['org_batch', 100] })].length;
      const result = body();
      sizes.push(before - [...table.getKeys({ start: ['org_batch', 0], end: ['org_batch', 100] })].length);
      return result;
    }) };
    Object.defineProperty(counted, 'flushed', { get: () => root.flushed });
    const trimming = new UpdateLog({ ...ledger, root: counted } as Ledger, 2);
    assert.equal(await trimming.trim(3), 8);
    assert.deepEqual(sizes, [3, 3, 2], 'three transactions of at most 3');
    assert.deepEqual(lowered.range('org_batch', 0, 10).map((u) => u.seq), [9, 10]);
  });

  test('an update left below retention by a write that did not commit is swept by trim and never replayed', async () => {
    const log = new UpdateLog(ledger, 3);
    for (let i = 1; i <= 10; i++) await ledger.root.transaction(() => log.append('org_t', update(`run_${i}`)));
    // As if the write that appended seq 5 (and removed seq 2) never committed: seq 2 stayed.
    await ledger.openDatabase('live-updates').put(['org_t', 2], { ...update('run_2'), seq: 2, org_id: 'org_t' });
    const replay = startReplay({ environment: 'production', runId: '' }, 0, []);
    assert.deepEqual(nextPage(log, 'org_t', replay, 10, Infinity, { isSkipped: () => false, between: () => new Set() }).frames.length, 3, 'only seqs 8-10 are replayed');
    assert.equal(await log.trim(), 1);
    assert.deepEqual([...ledger.openDatabase('live-updates').getKeys({ start: ['org_t', 0], end: ['org_t', 100] })], [['org_t', 8], ['org_t', 9], ['org_t', 10]]);
    assert.equal(await log.trim(), 0, 'nothing more to sweep');
  });

  test('a trim over many quiet orgs lets the event loop turn between them (it held the loop ~140 ms at 10,000 orgs)', async () => {
    const log = new UpdateLog(ledger, 100);
    await ledger.root.transaction(() => {
      for (let org = 0; org < 600; org++) log.append(`org_quiet_${org}`, update('run_1'));
    });
    let turned = false;
    const trimming = log.trim();
    setImmediate(() => (turned = true));
    assert.equal(await trimming, 0, 'nothing to remove');
    assert.equal(turned, true, 'another callback ran before the trim was done');
  });
});
