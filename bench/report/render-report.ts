// Turns a BenchReport into the text `npm run bench` prints: the machine line, then per scenario
// the systems table (throughput, p50, p99, ratio to peers), the latency curve and the targets.

import { isBusy } from '../machine.ts';
import type { BenchReport, LatencyPoint, ScenarioReport, SystemResult } from '../scenario.ts';
import { renderTable } from './text-table.ts';

export function renderReport(report: BenchReport): string {
  const m = report.machine;
  const lines = [
    `Sluice bench (${report.mode}) ${report.startedAt}`,
    `machine: ${m.cores} cores (${m.cpuModel}), ${m.memoryGiB} GiB, Node ${m.nodeVersion}, ${m.platform}, kernel ${m.kernel}, data dirs on ${m.dataDirFilesystem}`,
    `load average at start: ${m.loadAverageAtStart.join(' ')}; 4 KB write + fdatasync on the data-dir disk: p50 ${ms(m.fsync.p50Ms)} ms, p99 ${ms(m.fsync.p99Ms)} ms (${m.fsync.samples} samples)`,
  ];
  if (isBusy(m)) lines.push('WARNING: the machine was already busy when the run started; other work shares its cores and disk, so treat these numbers as noisy.');
  if (m.dataDirFilesystem === 'tmpfs') lines.push('WARNING: data dirs are on tmpfs, where fsync costs nothing: durability numbers are not meaningful (use --data-root).');
  for (const scenario of report.scenarios) lines.push('', ...renderScenario(scenario));
  return `${lines.join('\n')}\n`;
}

function renderScenario(scenario: ScenarioReport): string[] {
  const lines = [`== ${scenario.scenario}: ${scenario.title}`];
  const subject = scenario.systems.find((s) => s.role === 'subject' && s.status === 'measured');
  const rows = scenario.systems.map((s) => [
    s.label,
    s.status === 'measured' ? number(s.throughputPerSec) : statusWord(s),
    ms(s.p50Ms),
    ms(s.p99Ms),
    ratioCell(scenario, subject, s),
    s.status === 'measured' ? `${s.accepted ?? 0}/${s.completed ?? 0}` : '',
    s.status === 'measured' ? String(s.errors ?? 0) : '',
    s.note ?? '',
  ]);
  lines.push(
    ...renderTable(
      [
        { header: 'system', align: 'left' },
        { header: scenario.unit, align: 'right' },
        { header: 'p50 ms', align: 'right' },
        { header: 'p99 ms', align: 'right' },
        { header: 'sluice/peer', align: 'right' },
        { header: 'ok/answered', align: 'right' },
        { header: 'errors', align: 'right' },
        { header: 'note', align: 'left' },
      ],
      rows,
    ),
  );
  if (scenario.latencyCurve.length > 0) lines.push('', 'latency at a fixed offered rate (open loop):', ...renderCurve(scenario));
  if (scenario.targets.length > 0) {
    lines.push('', 'targets (reported, not asserted):');
    for (const t of scenario.targets) lines.push(`  [${t.verdict === 'not_measured' ? 'NOT MEASURED' : t.verdict.toUpperCase()}] ${t.description}${t.actual === undefined ? '' : `: ${t.actual}`}`);
  }
  const detail = [
    ...scenario.method.map((m) => `  ${m}`),
    ...scenario.systems.map((s) => `  ${s.system}: ${s.work}`),
    ...scenario.notes.map((n) => `  ${n}`),
  ];
  if (detail.length > 0) lines.push('', 'method:', ...detail);
  return lines;
}

function renderCurve(scenario: ScenarioReport): string[] {
  const label = (system: string): string => scenario.systems.find((s) => s.system === system)?.label ?? system;
  return renderTable(
    [
      { header: 'system', align: 'left' },
      { header: 'of ref peak', align: 'right' },
      { header: 'offered/s', align: 'right' },
      { header: 'achieved/s', align: 'right' },
      { header: 'p50 ms', align: 'right' },
      { header: 'p90 ms', align: 'right' },
      { header: 'p99 ms', align: 'right' },
      { header: 'max ms', align: 'right' },
      { header: 'errors', align: 'right' },
      { header: 'note', align: 'left' },
    ],
    scenario.latencyCurve.map((p: LatencyPoint) => [
      label(p.system),
      `${Math.round(p.fractionOfPeak * 100)} %`,
      number(p.targetRatePerSec),
      p.status === 'measured' ? number(p.achievedRatePerSec) : p.status.replaceAll('_', ' '),
      ms(p.p50Ms),
      ms(p.p90Ms),
      ms(p.p99Ms),
      ms(p.maxMs),
      p.errors === undefined ? '' : String(p.errors),
      p.note ?? '',
    ]),
  );
}

function ratioCell(scenario: ScenarioReport, subject: SystemResult | undefined, system: SystemResult): string {
  if (system.role === 'subject' || subject === undefined) return system.role === 'subject' ? '' : '-';
  const ratio = scenario.ratios.find((r) => r.subject === subject.system && r.peer === system.system);
  return ratio === undefined ? '-' : `${ratio.ratio.toFixed(2)}x`;
}

function statusWord(system: SystemResult): string {
  return system.status === 'failed' ? 'FAILED' : 'not yet measured';
}

function number(value: number | undefined): string {
  return value === undefined ? '' : Math.round(value).toLocaleString('en-US');
}

function ms(value: number | undefined): string {
  if (value === undefined) return '';
  // Three decimals below 1 ms: WASM calls take tens of microseconds.
  return value >= 100 ? value.toFixed(0) : value >= 1 ? value.toFixed(2) : value.toFixed(3);
}
