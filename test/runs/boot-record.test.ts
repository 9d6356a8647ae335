// Each start records how the previous ones ended, so that boot recovery counts only crashes toward
// failing a step that keeps being interrupted: an attempt a clean stop left open, or one that a
// start claimed and was killed before sending, is no step's fault. Found by review: a start killed
// during its recovery (a crash loop, a deploy) and clean stops with a slow step out counted as
// crashes, and five of them failed runs whose step had never been sent again.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import type { PersistedRun } from '../../actors/run-transition.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import type { LiveRooms } from '../../runtime/rooms/live-rooms.ts';
import { UpdateLog } from '../../runtime/rooms/update-log.ts';
import { explainRun } from '../../runtime/explain-text.ts';
import { beginBoot, MAX_UNSENT_AT_STOP } from '../../runtime/runs/boot-record.ts';
import { recoverUnfinishedRuns } from '../../runtime/runs/run-recovery.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { runUpdateFor } from '../../runtime/runs/run-update.ts';
import { call, createOrg } from '../helpers/http.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';
import { eventually, startReceiver, type Receiver, type Reply } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir, type ChildRuntime } from '../helpers/runtime.ts';

for (const kind of LEDGER_KINDS) {
  describe(`boot record on ${kind.name}`, () => {
    test('tells a crash, a clean stop and a start cut off apart, by how each process ended', async () => {
      const { ledger, close } = kind.open();
      try {
        const first = await beginBoot(ledger, 1_000);
        assert.equal(first.causeOf(500), 'crashed', 'nothing on record (a first start, or an earlier release): a crash, as before');
        await first.beforeFirstEffect();
        assert.equal((await beginBoot(ledger, 2_000)).causeOf(1_500), 'crashed', 'it was sending when it ended, without a clean stop');

        const stopping = await beginBoot(ledger, 3_000);
        await stopping.beforeFirstEffect();
        await stopping.cleanStop();
        const cutOff = await beginBoot(ledger, 4_000);
        assert.equal(cutOff.causeOf(3_500), 'stopped');
        // Killed before it sent anything: what it claimed at its recovery (4,000) and after it (a
        // retry timer due at 4,200, say) was never sent. So is the next start.
        const again = await beginBoot(ledger, 5_000);
        assert.deepEqual([again.causeOf(4_000), again.causeOf(4_200)], ['start_cut_off', 'start_cut_off']);
        assert.equal(again.causeOf(3_500), 'stopped', 'attempts claimed before it are still the clean stop\'s');
        // A clean stop of a start that sent nothing leaves it cut off: nothing it claimed went out.
        await again.cleanStop();
        const third = await beginBoot(ledger, 6_000);
        assert.deepEqual([third.causeOf(4_000), third.causeOf(5_000), third.causeOf(5_500), third.causeOf(3_500)], ['start_cut_off', 'start_cut_off', 'start_cut_off', 'stopped']);
        await third.beforeFirstEffect();
        const after = await beginBoot(ledger, 7_000);
        assert.deepEqual([after.causeOf(6_000), after.causeOf(4_000)], ['crashed', 'crashed'], 'the start that got to send ended without a clean stop');
      } finally {
        await close();
      }
    });

    test('a clean stop names the attempts it left unsent, until a later start sends; at most MAX_UNSENT_AT_STOP of them', async () => {
      const { ledger, close } = kind.open();
      try {
        const first = await beginBoot(ledger, 1_000);
        await first.beforeFirstEffect();
        const unsent = Array.from({ length: MAX_UNSENT_AT_STOP + 1 }, (_, i) => [`org\u0000run_${i}`, 3] as const);
        await first.cleanStop(unsent);
        const next = await beginBoot(ledger, 2_000);
        assert.equal(next.causeOf(1_500, 'org\u0000run_0', 3), 'stopped_unsent');
        assert.equal(next.causeOf(1_500, `org\u0000run_${MAX_UNSENT_AT_STOP - 1}`, 3), 'stopped_unsent');
        assert.equal(next.causeOf(1_500, `org\u0000run_${MAX_UNSENT_AT_STOP}`, 3), 'stopped', 'past the cap: unknown');
        assert.equal(next.causeOf(1_500, 'org\u0000run_0', 2), 'stopped', 'another fence of the run');
        assert.equal(next.causeOf(1_500, 'org\u0000run_other', 3), 'stopped', 'an attempt out that may have gone');
        assert.equal(next.causeOf(1_500), 'stopped');
        // Cut off before it sent: the stop's attempts may still be open at the start after it.
        const again = await beginBoot(ledger, 3_000);
        assert.deepEqual([again.causeOf(1_500, 'org\u0000run_0', 3), again.causeOf(2_500, 'org\u0000run_0', 4)], ['stopped_unsent', 'start_cut_off']);
        await again.beforeFirstEffect();
        await again.cleanStop();
        const sent = await beginBoot(ledger, 4_000);
        assert.equal(sent.causeOf(3_500, 'org\u0000run_0', 3), 'stopped', 'a start that sent drops the earlier stop\'s list');
        await sent.beforeFirstEffect();
        assert.equal((await beginBoot(ledger, 5_000)).causeOf(4_500, 'org\u0000run_0', 3), 'crashed');
      } finally {
        await close();
      }
    });

    test('a start keeps its time past the attempts left open: with the clock set back, a start cut off does not take a crashed process\'s attempts for its own', async () => {
      const { ledger, close } = kind.open();
      try {
        const sending = await beginBoot(ledger, 10_000);
        await sending.beforeFirstEffect();
        // It claims attempts up to 10,500 and crashes; the clock is set back an hour-ish.
        const setBack = await beginBoot(ledger, 2_000, 10_500);
        assert.equal(setBack.nowMs, 10_501, 'just past the latest attempt left open');
        assert.equal(setBack.causeOf(10_500), 'crashed');
        // Killed before it rewrote the run claimed at 10,500 (and before it sent anything).
        const next = await beginBoot(ledger, 2_100, 10_501);
        assert.equal(next.causeOf(10_500), 'crashed', 'the crashed process\'s attempt may have gone out');
        assert.equal(next.causeOf(10_501), 'start_cut_off', 'what the cut-off start claimed did not');
        assert.equal((await beginBoot(ledger, 20_000, 10_501)).nowMs, 20_000, 'the clock, when it is later');
      } finally {
        await close();
      }
    });
  });
}

test('a run whose step is out at five clean stops in a row (the disk below its floor at each) is sent again at each start and not failed; the attempts say the runtime was stopped', async () => {
  const dataDir = tempDir();
  let release: () => void = () => undefined;
  const receiver = await startReceiver([{ status: 200, body: '{}', after: new Promise<void>((resolve) => (release = resolve)) }]);
  // Below the 256 MiB floor at each stop (found by review: the stop's record was refused by the
  // floor, so each clean stop counted as a crash), plenty at each start.
  let free = 10 * 1024 ** 3;
  const freeDiskSpace = async (): Promise<number> => free;
  let rt = await startRuntime({ dataDir, freeDiskSpace });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-clean-stops', 'pro');
    const made = await call(rt.url, 'POST', '/organizations/acct-clean-stops/workflows', { token: key, json: { name: 'w', trigger_event: 'e', steps: [{ id: 's', type: 'webhook', url: receiver.url }] } });
    assert.equal(made.status, 201, made.text);
    assert.equal((await call(rt.url, 'POST', '/organizations/acct-clean-stops/events', { token: key, json: { type: 'e', payload: {}, id: 'evt_clean_1' } })).status, 202);
    for (let start = 1; start <= 6; start += 1) {
      await eventually(`the step out in start ${start}`, () => receiver.received.length, (n) => n === start);
      if (start === 6) break;
      free = 1024 * 1024;
      await rt.runtime.disk.probeNow();
      await rt.close(); // a clean stop cuts the request off
      free = 10 * 1024 ** 3;
      rt = await startRuntime({ dataDir, freeDiskSpace });
    }
    release();
    const run = await eventually(
      'the run completed',
      async () => ((await call(rt.url, 'GET', '/organizations/acct-clean-stops/runs', { token: key })).body.runs as Array<{ run_id: string; state: string }>)[0],
      (r) => r?.state === 'completed',
    );
    const view = (await call(rt.url, 'GET', `/organizations/acct-clean-stops/runs/${run!.run_id}`, { token: key })).body.run;
    const attempts = view.steps[0].attempts as Array<{ outcome: string; evidence: { reason?: string } | null }>;
    assert.deepEqual(attempts.map((a) => a.outcome), ['abandoned', 'abandoned', 'abandoned', 'abandoned', 'abandoned', 'succeeded']);
    assert.deepEqual(attempts.slice(0, 5).map((a) => a.evidence?.reason), Array(5).fill('runtime_stopped'));
    assert.match(explainRun(view), /attempt 1 \(fence 1\): abandoned; the runtime was stopped cleanly while it was out: it may have reached its target/);
    assert.equal(new Set(receiver.received.map((r) => r.headers['idempotency-key'])).size, 1, 'one key throughout');
  } finally {
    release();
    await rt.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a step out at five crashes (SIGKILL while it is out) still fails the run; a start killed before it sent, between them, neither counts nor breaks the row', { timeout: 120_000 }, () =>
  withCrashes([{ status: 200, body: '{}', after: new Promise<void>(() => undefined) }], async (dataDir, receiver, spawn) => {
    let child = await spawn();
    const key = await startOneWebhookRun(child.url, 'acct-crash-loop', receiver.url);
    const crashOnceSent = async (sends: number): Promise<void> => {
      await eventually(`the step out (send ${sends})`, () => receiver.received.length, (n) => n === sends);
      child.child.kill('SIGKILL');
      await child.exited;
    };
    for (let crash = 1; crash <= 4; crash += 1) {
      await crashOnceSent(crash);
      // After the fourth crash, a start cut off after its recovery's write, before it sent anything:
      // what it leaves on disk (its recovery claimed the step's sixth attempt).
      if (crash === 4) await cutOffStart(dataDir);
      child = await spawn();
    }
    await crashOnceSent(5);
    child = await spawn();
    const view = await runWhen(child.url, 'acct-crash-loop', key, 'failed');
    assert.equal(view.error.code, 'step_interrupted_repeatedly');
    const reasons = (view.steps[0].attempts as Array<{ evidence: { reason: string } }>).map((a) => a.evidence.reason);
    assert.deepEqual(reasons, ['runtime_restarted', 'runtime_restarted', 'runtime_restarted', 'runtime_restarted', 'runtime_start_interrupted', 'runtime_restarted']);
    assert.equal(receiver.received.length, 5, 'not sent after the fifth crash');
    const explained = explainRun(view);
    assert.match(explained, /attempt 4 \(fence 4\): abandoned; the runtime went down while it was out: it may have reached its target/);
    assert.match(explained, /attempt 5 \(fence 5\): abandoned; nothing sent \(the runtime ended before it sent any step\)/);
  }));

test('a step out at a crash, then a start with the clock set back an hour killed before its recovery wrote: the attempt still reads as a crash (it went out), not as the cut-off start\'s', { timeout: 60_000 }, () =>
  withCrashes([{ status: 200, body: '{}', after: new Promise<void>(() => undefined) }, { status: 200, body: '{}' }], async (dataDir, receiver, spawn) => {
    const child = await spawn();
    const key = await startOneWebhookRun(child.url, 'acct-set-back', receiver.url);
    await eventually('the step out', () => receiver.received.length, (n) => n === 1);
    child.child.kill('SIGKILL');
    await child.exited;
    await cutOffStart(dataDir, { killedBeforeWrite: true, clockMs: Date.now() - 3_600_000 });
    const view = await runWhen((await spawn()).url, 'acct-set-back', key, 'completed');
    const attempts = view.steps[0].attempts as Array<{ outcome: string; evidence: { reason?: string; effect_sent?: string } | null }>;
    assert.deepEqual(attempts.map((a) => a.outcome), ['abandoned', 'succeeded']);
    assert.deepEqual(attempts[0]!.evidence, { reason: 'runtime_restarted', effect_sent: 'unknown' });
    assert.match(explainRun(view), /attempt 1 \(fence 1\): abandoned; the runtime went down while it was out: it may have reached its target/);
    assert.equal(receiver.received.length, 2);
  }));

/**
 * Runs `body` with a data dir and a receiver answering `replies`; `spawn` starts a runtime child on
 * the dir, and the last one started is SIGKILLed at the end (the earlier ones the body killed).
 */
async function withCrashes(replies: Reply[], body: (dataDir: string, receiver: Receiver, spawn: () => Promise<ChildRuntime>) => Promise<void>): Promise<void> {
  const dataDir = tempDir();
  const receiver = await startReceiver(replies);
  let last: ChildRuntime | undefined;
  try {
    await body(dataDir, receiver, async () => (last = await spawnRuntime(dataDir)));
  } finally {
    if (last !== undefined) {
      last.child.kill('SIGKILL');
      await last.exited;
    }
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Creates `org` with a workflow of one webhook step to `receiverUrl` and sends it an event; returns the org's key. */
async function startOneWebhookRun(url: string, org: string, receiverUrl: string): Promise<string> {
  const key = await createOrg(url, ADMIN_TOKEN, org, 'pro');
  assert.equal((await call(url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'e', steps: [{ id: 's', type: 'webhook', url: receiverUrl }] } })).status, 201);
  assert.equal((await call(url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'e', payload: {}, id: `evt_${org}` } })).status, 202);
  return key;
}

/** The org's one run (its API view), once it is in `state`. */
async function runWhen(url: string, org: string, key: string, state: string): Promise<any> {
  const run = await eventually(
    `the run ${state}`,
    async () => ((await call(url, 'GET', `/organizations/${org}/runs?state=${state}`, { token: key })).body.runs as Array<{ run_id: string }>)[0],
    (r) => r !== undefined,
  );
  return (await call(url, 'GET', `/organizations/${org}/runs/${run!.run_id}`, { token: key })).body.run;
}

/**
 * What a start killed between its recovery's write and its first sends leaves in `dataDir`; with
 * `killedBeforeWrite`, killed before that write (its boot record written, no run rewritten), its
 * wall clock at `clockMs`.
 */
async function cutOffStart(dataDir: string, { killedBeforeWrite = false, clockMs = Date.now() } = {}): Promise<void> {
  const ledger = openLedger(dataDir);
  try {
    const runs = new RunStore(ledger);
    if (killedBeforeWrite) runs.write = () => assert.fail('killed before this write');
    const deps = {
      ledger,
      runs,
      updateLog: new UpdateLog(ledger, 1000),
      rooms: { publish: () => undefined } as unknown as LiveRooms,
      updateFor: (run: PersistedRun) => runUpdateFor(run, undefined),
      admitNow: () => true,
      release: () => undefined,
    };
    const recovering = recoverUnfinishedRuns(deps, (latestClaimedAt) => beginBoot(ledger, clockMs, latestClaimedAt));
    if (killedBeforeWrite) await assert.rejects(recovering, /killed before this write/);
    else assert.equal((await recovering).runs.length, 1);
  } finally {
    await ledger.close();
  }
}
