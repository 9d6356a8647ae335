// Builders every scenario uses for its report: rows for systems that were not or could not be
// measured, lookups of measured rows, subject-to-peer ratios, and pass/miss verdicts for the targets.

import type { LatencyPoint, PeerRatio, SystemResult, TargetCheck } from './scenario.ts';

export type SystemMeta = Pick<SystemResult, 'system' | 'label' | 'role' | 'work'>;

type CurveLatencies = Pick<LatencyPoint, 'p50Ms' | 'p90Ms' | 'p99Ms' | 'maxMs'>;

/** The percentiles a fixed-rate run measured, as the optional fields of its curve point. */
export function curveLatencies(measured: { readonly p50Ms?: number; readonly p90Ms?: number; readonly p99Ms?: number; readonly maxMs?: number }): CurveLatencies {
  return {
    ...(measured.p50Ms === undefined ? {} : { p50Ms: measured.p50Ms }),
    ...(measured.p90Ms === undefined ? {} : { p90Ms: measured.p90Ms }),
    ...(measured.p99Ms === undefined ? {} : { p99Ms: measured.p99Ms }),
    ...(measured.maxMs === undefined ? {} : { maxMs: measured.maxMs }),
  };
}

/** The row of `system` if it was measured. */
export function measuredRow(systems: readonly SystemResult[], system: string): SystemResult | undefined {
  return systems.find((s) => s.system === system && s.status === 'measured');
}

/** A scenario counts as measured when at least one of its rows was. */
export function scenarioStatus(systems: readonly SystemResult[]): 'measured' | 'failed' {
  return systems.some((s) => s.status === 'measured') ? 'measured' : 'failed';
}

export function notYetMeasured(meta: SystemMeta, note: string): SystemResult {
  return { ...meta, status: 'not_yet_measured', note };
}

/** A system that was started but broke: the note keeps the first lines of the error, never a number. */
export function failedResult(meta: SystemMeta, error: unknown): SystemResult {
  const message = error instanceof Error ? error.message : String(error);
  return { ...meta, status: 'failed', note: message.split('\n').slice(0, 6).join(' | ').slice(0, 600) };
}

/** Throughput of each measured subject divided by that of each measured peer. */
export function subjectToPeerRatios(systems: readonly SystemResult[]): PeerRatio[] {
  const measured = systems.filter((s) => s.status === 'measured' && (s.throughputPerSec ?? 0) > 0);
  const ratios: PeerRatio[] = [];
  for (const subject of measured.filter((s) => s.role === 'subject')) {
    for (const peer of measured.filter((s) => s.role === 'peer')) {
      ratios.push({ subject: subject.system, peer: peer.system, ratio: (subject.throughputPerSec ?? 0) / (peer.throughputPerSec ?? 1) });
    }
  }
  return ratios;
}

/** `actual` undefined means the inputs were not measured: the verdict says so instead of guessing. */
export function judge(id: string, description: string, actual: number | undefined, passes: (value: number) => boolean, format: (value: number) => string): TargetCheck {
  if (actual === undefined || !Number.isFinite(actual)) return { id, description, verdict: 'not_measured' };
  return { id, description, verdict: passes(actual) ? 'pass' : 'miss', actual: format(actual) };
}
