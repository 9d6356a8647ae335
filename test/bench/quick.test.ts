// Runs `npm run bench -- --quick` as a person would (its own process, real peers, real Sluice when
// runtime/cli.ts exists) and checks the report's shape and that its counts are nonzero and sane.
// Speed is never asserted: targets are reported, and this machine is shared with other tests.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BenchReport, ScenarioReport, SystemResult } from '../../bench/scenario.ts';
import { devicesSizes } from '../../bench/scenarios/devices/devices-sizes.ts';

const REPO = resolve(import.meta.dirname, '../..');
const MEASURED = ['ingest', 'e2e', 'wasm-invoke', 'recovery', 'fairness', 'fan-out', 'devices'];

/** A measured row whose every operation succeeded; latencies may be sub-microsecond (in-process WASM calls). */
function assertCleanRow(s: SystemResult | undefined, name: string): asserts s is SystemResult {
  assert.ok(s !== undefined, `${name} has a row`);
  assert.equal(s.status, 'measured', `${name}: ${s.note ?? ''}`);
  assert.ok((s.completed ?? 0) > 0, `${name} completed operations`);
  assert.equal(s.accepted, s.completed, `${name}: every operation ended the expected way`);
  assert.equal(s.errors, 0, `${name}: no errors`);
  assert.ok(Number.isFinite(s.throughputPerSec) && (s.throughputPerSec ?? 0) > 0, `${name} throughput`);
  assert.ok(s.p50Ms !== undefined && s.p99Ms !== undefined && s.p50Ms >= 0 && s.p50Ms <= s.p99Ms, `${name} p50 <= p99`);
}

function scenarioOf(report: BenchReport, name: string): ScenarioReport {
  const found = report.scenarios.find((s) => s.scenario === name);
  assert.ok(found !== undefined, `the report has the ${name} scenario`);
  return found;
}

function assertJudged(scenario: ScenarioReport, ids: readonly string[]): void {
  assert.deepEqual(scenario.targets.map((t) => t.id), ids);
  for (const t of scenario.targets) assert.ok(['pass', 'miss', 'not_measured'].includes(t.verdict), `${t.id}: ${t.verdict}`);
}

function assertSaneMeasurement(s: SystemResult): void {
  assert.equal(s.status, 'measured', `${s.system}: ${s.note ?? ''}`);
  assert.ok((s.completed ?? 0) > 0, `${s.system} answered requests`);
  assert.equal(s.accepted, s.completed, `${s.system}: every unique, well-signed request is accepted`);
  assert.equal(s.errors, 0, `${s.system}: no errors`);
  assert.ok(Number.isFinite(s.throughputPerSec) && (s.throughputPerSec ?? 0) > 0, `${s.system} throughput`);
  assert.ok((s.durationSec ?? 0) > 0, `${s.system} duration`);
  assert.ok(s.p50Ms !== undefined && s.p99Ms !== undefined && s.p50Ms > 0 && s.p50Ms <= s.p99Ms, `${s.system} p50 <= p99`);
}

/** What the report says failed (a non-zero exit names no system of its own). */
function failedSystems(reportFile: string): string {
  try {
    const written = JSON.parse(readFileSync(reportFile, 'utf8')) as BenchReport;
    return written.scenarios
      .flatMap((scenario) => scenario.systems.filter((system) => system.status === 'failed').map((system) => `FAILED ${scenario.scenario} / ${system.label}: ${system.note ?? ''}`))
      .join('\n');
  } catch (error) {
    return `(no report: ${error instanceof Error ? error.message : String(error)})`;
  }
}

describe('npm run bench -- --quick', () => {
  let dir = '';
  let report: BenchReport;
  let stdout = '';
  let ingest: ScenarioReport;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-quick-test-'));
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--quick', '--results-dir', dir, '--out', join(dir, 'report.json')], {
      cwd: REPO,
      encoding: 'utf8',
      timeout: 280_000,
    });
    stdout = run.stdout;
    assert.equal(run.status, 0, `bench exited ${run.status ?? run.signal}:\n${failedSystems(join(dir, 'report.json'))}\n${run.stderr.slice(-3000)}\n${stdout.slice(-3000)}`);
    report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as BenchReport;
    const found = report.scenarios.find((s) => s.scenario === 'ingest');
    assert.ok(found !== undefined, 'the report has the ingest scenario');
    ingest = found;
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('describes the machine and the run', () => {
    assert.equal(report.version, 1);
    assert.equal(report.mode, 'quick');
    assert.ok(report.machine.cores >= 1);
    assert.equal(report.machine.nodeVersion, process.version);
    assert.equal(report.machine.loadAverageAtStart.length, 3);
    assert.ok(report.machine.fsync.samples > 0 && report.machine.fsync.p50Ms > 0 && report.machine.fsync.p50Ms <= report.machine.fsync.p99Ms);
    assert.ok(Date.parse(report.finishedAt) >= Date.parse(report.startedAt));
    assert.match(stdout, new RegExp(`machine: ${report.machine.cores} cores .*Node ${process.version}`));
    assert.ok(existsSync(join(dir, 'latest.json')), 'the JSON also lands in the results dir');
  });

  it('runs every scenario in order, each of them measured', () => {
    assert.deepEqual(report.scenarios.map((s) => [s.scenario, s.status]), MEASURED.map((name) => [name, 'measured']));
  });

  it('measures the three peers with sane counts', () => {
    for (const name of ['uws-hmac', 'fastify-sqlite', 'lmdb-commit-loop']) {
      const system = ingest.systems.find((s) => s.system === name);
      assert.ok(system !== undefined, `${name} has a row`);
      assert.equal(system.role, 'peer');
      assertSaneMeasurement(system);
    }
  });

  it('measures Sluice once its runtime exists, and then compares it with every peer', () => {
    const sluice = ingest.systems.find((s) => s.system === 'sluice');
    assert.ok(sluice !== undefined);
    assert.equal(sluice.role, 'subject');
    if (!existsSync(join(REPO, 'runtime', 'cli.ts'))) {
      assert.equal(sluice.status, 'not_yet_measured');
      return;
    }
    assertSaneMeasurement(sluice);
    assert.deepEqual(ingest.ratios.map((r) => r.peer).sort(), ['fastify-sqlite', 'lmdb-commit-loop', 'uws-hmac']);
    for (const r of ingest.ratios) assert.ok(Number.isFinite(r.ratio) && r.ratio > 0, `ratio to ${r.peer}`);
  });

  it('takes the open-loop latency curve at 25, 50 and 75 % of the reference peak', () => {
    const reference = ingest.systems.find((s) => s.system === 'sluice')?.status === 'measured' ? 'sluice' : 'fastify-sqlite';
    const points = ingest.latencyCurve.filter((p) => p.system === reference);
    assert.deepEqual(points.map((p) => p.fractionOfPeak), [0.25, 0.5, 0.75]);
    for (const p of points) {
      assert.equal(p.status, 'measured');
      assert.ok((p.completed ?? 0) > 0 && p.errors === 0, `${p.fractionOfPeak}: answered without errors`);
      assert.ok(p.p50Ms !== undefined && p.p99Ms !== undefined && p.p50Ms <= p.p99Ms);
      assert.ok((p.achievedRatePerSec ?? 0) > 0);
    }
  });

  it('judges the three ingest targets without asserting them', () => {
    assert.deepEqual(ingest.targets.map((t) => t.id), ['ingest.throughput', 'ingest.vs_fastify_sqlite', 'ingest.p99_at_half_peak']);
    for (const t of ingest.targets) assert.ok(['pass', 'miss', 'not_measured'].includes(t.verdict));
    assert.match(stdout, /targets \(reported, not asserted\)/);
  });

  it('names its load generator and durability in the method', () => {
    assert.ok(ingest.method.some((m) => /wrk|Node closed-loop/.test(m)));
    assert.ok(ingest.method.some((m) => /open-loop/.test(m)));
    assert.ok(ingest.notes.some((n) => /synchronous=FULL/.test(n)));
  });

  it('wasm-invoke: measures the addon, the hook-runner over gRPC and the Node peer for both guests', () => {
    const wasm = scenarioOf(report, 'wasm-invoke');
    assert.equal(wasm.status, 'measured');
    const runtimeExists = existsSync(join(REPO, 'runtime', 'hook-runner', 'client.ts'));
    for (const module of ['echo', 'scorer']) {
      for (const mode of ['sequential', 'concurrent']) {
        assertCleanRow(wasm.systems.find((s) => s.system === `addon-${module}-${mode}`), `addon ${module} ${mode}`);
        if (runtimeExists) assertCleanRow(wasm.systems.find((s) => s.system === `hook-runner-${module}-${mode}`), `hook-runner ${module} ${mode}`);
      }
      for (const mode of ['instantiate', 'reused']) {
        const peer = wasm.systems.find((s) => s.system === `node-webassembly-${module}-${mode}`);
        assertCleanRow(peer, `node ${module} ${mode}`);
        assert.equal(peer.role, 'peer');
      }
    }
    if (runtimeExists) assertCleanRow(wasm.systems.find((s) => s.system === 'hook-runner-echo-simulate'), 'hook-runner simulate');
    assertCleanRow(wasm.systems.find((s) => s.system === 'libuv-pool-hop'), 'thread-pool hop');
    const fuel = wasm.systems.find((s) => s.system === 'addon-fuel-stop');
    assertCleanRow(fuel, 'fuel stop');
    assert.ok((fuel.p50Ms ?? 0) > 0, 'burning 50M fuel takes measurable time');
    assert.deepEqual(wasm.ratios.map((r) => r.peer).sort(), ['node-webassembly-echo-instantiate', 'node-webassembly-echo-reused', 'node-webassembly-scorer-instantiate', 'node-webassembly-scorer-reused']);
    assertJudged(wasm, ['wasm.grpc_invoke_p50', 'wasm.addon_run_p50']);
    for (const t of wasm.targets) assert.notEqual(t.verdict, 'not_measured', `${t.id} has its inputs`);
  });

  it('recovery: every run in flight before kill -9 completes after the restart, none lost, no effect repeated after its 200', () => {
    const recovery = scenarioOf(report, 'recovery');
    assert.equal(recovery.status, 'measured');
    const sluice = recovery.systems.find((s) => s.system === 'sluice');
    assertCleanRow(sluice, 'sluice recovery');
    assertJudged(recovery, ['recovery.time', 'recovery.lost', 'recovery.duplicates']);
    // Correctness, not speed: these two are asserted.
    assert.equal(recovery.targets.find((t) => t.id === 'recovery.lost')?.verdict, 'pass');
    assert.equal(recovery.targets.find((t) => t.id === 'recovery.duplicates')?.verdict, 'pass');
    const receiver = recovery.notes.find((n) => n.startsWith('receiver:'));
    assert.match(receiver ?? '', new RegExp(`distinct keys ${sluice.completed}\\b`), 'one idempotency key per run');
    assert.match(receiver ?? '', /deliveries after a 200 had been written 0/);
    // The BullMQ peer, killed and restarted the same way, when Redis is there.
    const bullmq = recovery.systems.find((s) => s.system === 'bullmq');
    assert.ok(bullmq !== undefined && bullmq.role === 'peer');
    if (bullmq.status === 'measured') {
      assertCleanRow(bullmq, 'bullmq recovery');
      assert.equal(bullmq.completed, sluice.completed, 'as many jobs as runs');
      assert.deepEqual(recovery.ratios.map((r) => r.peer), ['bullmq']);
      assert.match(recovery.notes.find((n) => n.startsWith('bullmq: receiver:')) ?? '', new RegExp(`distinct keys ${sluice.completed}\\b.*deliveries after a 200 had been written 0; jobs completed \\(Redis\\) ${sluice.completed} of ${sluice.completed}; lost 0; duplicates 0`));
    } else assert.equal(bullmq.status, 'not_yet_measured', bullmq.note);
  });

  it('fairness: measures tenant B alone and under tenant A\'s flood, and judges the 2x target', () => {
    const fairness = scenarioOf(report, 'fairness');
    assert.equal(fairness.status, 'measured');
    assertCleanRow(fairness.systems.find((s) => s.system === 'tenant-b-alone'), 'B alone');
    assertCleanRow(fairness.systems.find((s) => s.system === 'tenant-b-flooded'), 'B flooded');
    const flood = fairness.systems.find((s) => s.system === 'tenant-a-flood');
    assert.ok(flood?.status === 'measured' && flood.accepted === flood.completed && (flood.completed ?? 0) > 0, 'every event of A was accepted');
    assertJudged(fairness, ['fairness.p99_ratio']);
    assert.notEqual(fairness.targets[0]?.verdict, 'not_measured');
  });

  it('e2e: measures Sluice (live-room notice) and the BullMQ peer when Redis is available', () => {
    const e2e = scenarioOf(report, 'e2e');
    assert.equal(e2e.status, 'measured');
    assertCleanRow(e2e.systems.find((s) => s.system === 'sluice'), 'sluice e2e');
    const bullmq = e2e.systems.find((s) => s.system === 'bullmq');
    assert.ok(bullmq !== undefined && bullmq.role === 'peer');
    if (bullmq.status === 'measured') {
      assertCleanRow(bullmq, 'bullmq e2e');
      assert.deepEqual(e2e.ratios.map((r) => r.peer), ['bullmq']);
    } else assert.equal(bullmq.status, 'not_yet_measured', bullmq.note);
    assertJudged(e2e, ['e2e.throughput', 'e2e.vs_bullmq']);
    for (const system of bullmq.status === 'measured' ? ['sluice', 'bullmq'] : ['sluice']) {
      assert.match(e2e.notes.find((n) => n.startsWith(`${system}: the receiver`)) ?? '', /, 0 delivered again after a 200$/, system);
    }
  });

  it('fan-out: Sluice\'s live room and the ws peer deliver every update once to every subscriber, at both sizes', () => {
    const fanout = scenarioOf(report, 'fan-out');
    assert.equal(fanout.status, 'measured');
    const sizes = fanout.systems.filter((s) => s.role === 'subject').map((s) => Number(s.system.replace('sluice-', '')));
    assert.equal(sizes.length, 2, 'two subscriber counts');
    for (const subscribers of sizes) {
      for (const name of [`sluice-${subscribers}`, `ws-${subscribers}`]) {
        const row = fanout.systems.find((s) => s.system === name);
        assertCleanRow(row, name);
        // completed = updates published x subscribers: a whole number of updates per subscriber.
        assert.equal((row.completed ?? 0) % subscribers, 0, `${name}: expected deliveries are updates x subscribers`);
        assert.ok((row.completed ?? 0) / subscribers >= 3, `${name}: at least one run's three updates`);
        assert.match(row.note ?? '', new RegExp(`\\b${subscribers}/${subscribers} subscribers got each of the \\d+ updates once`));
      }
    }
    assert.deepEqual(fanout.ratios.map((r) => r.peer), sizes.map((n) => `ws-${n}`));
    assertJudged(fanout, ['fanout.deliveries_10k']);
    assert.ok(fanout.notes.some((n) => /^open files: /.test(n)), 'the open-file limit is reported');
  });

  it('devices: Sluice and the ws + LMDB peer ack every message as newly stored, and store exactly what they acked', () => {
    const devices = scenarioOf(report, 'devices');
    assert.equal(devices.status, 'measured');
    const { count } = devicesSizes(true);
    for (const name of ['sluice', 'ws-lmdb']) {
      const row = devices.systems.find((s) => s.system === name);
      assertCleanRow(row, `${name} devices`);
      assert.equal(row.completed, count, `${name}: every measured message answered`);
      const stored = /(\d+) messages stored \([^)]*\) for (\d+) fresh acks/.exec(devices.notes.find((n) => n.startsWith(`${name}:`)) ?? '');
      assert.ok(stored !== null, `${name}: the server's stored count is reported`);
      assert.equal(stored[1], stored[2], `${name}: stored = acked (warm-up included)`);
    }
    assert.equal(devices.systems.find((s) => s.system === 'ws-lmdb')?.role, 'peer');
    assert.deepEqual(devices.ratios.map((r) => r.peer), ['ws-lmdb']);
    assertJudged(devices, []);
  });
});
