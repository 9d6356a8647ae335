// The contract every benchmark scenario implements and the report shape it returns:
// the runner, the table and the JSON writer depend on this file only, never on a scenario.

import type { ChildProcesses } from './harness/children.ts';
import type { TempDirs } from './harness/temp-dirs.ts';
import type { MachineInfo } from './machine.ts';

/** `measured` carries numbers; the other two carry a `note` saying why there are none. */
export type MeasureStatus = 'measured' | 'not_yet_measured' | 'failed';

/** `subject` is Sluice; `peer` is what it is compared with in the same run. */
export type SystemRole = 'subject' | 'peer';

/** One system's result in one scenario. Numbers are present only when `status` is `measured`. */
export interface SystemResult {
  readonly system: string;
  readonly label: string;
  readonly role: SystemRole;
  readonly status: MeasureStatus;
  readonly note?: string;
  /** What the system did per operation, in one line (shown under the table). */
  readonly work: string;
  readonly throughputPerSec?: number;
  readonly p50Ms?: number;
  readonly p99Ms?: number;
  /** Operations answered in the measured phase (warm-up excluded). */
  readonly completed?: number;
  /** Of those, answered as success (204 for ingest). */
  readonly accepted?: number;
  /** Anything that was neither a success nor expected: 4xx/5xx, socket errors, timeouts. */
  readonly errors?: number;
  readonly durationSec?: number;
  /** Answers by HTTP status (`"204": n`); runs driven by wrk can only tell `2xx` from `non-2xx`. */
  readonly statuses?: Readonly<Record<string, number>>;
}

/** `subject` throughput divided by `peer` throughput, same scenario, same run. */
export interface PeerRatio {
  readonly subject: string;
  readonly peer: string;
  readonly ratio: number;
}

/** One point of a rate-limited (open-loop) latency curve. */
export interface LatencyPoint {
  readonly system: string;
  readonly fractionOfPeak: number;
  readonly targetRatePerSec: number;
  /** `over_capacity`: the rate exceeds what this system sustained at peak, so it was not offered. */
  readonly status: MeasureStatus | 'over_capacity';
  readonly note?: string;
  readonly achievedRatePerSec?: number;
  readonly p50Ms?: number;
  readonly p90Ms?: number;
  readonly p99Ms?: number;
  readonly maxMs?: number;
  readonly completed?: number;
  readonly errors?: number;
}

/** A target from the issue, judged against the numbers; reported, never asserted. */
export interface TargetCheck {
  readonly id: string;
  readonly description: string;
  readonly verdict: 'pass' | 'miss' | 'not_measured';
  readonly actual?: string;
}

export interface ScenarioReport {
  readonly scenario: string;
  readonly title: string;
  readonly status: MeasureStatus;
  /** Throughput unit shown in the table header, e.g. `events/s`. */
  readonly unit: string;
  /** How load was applied (generator, connections, durability), printed with the table. */
  readonly method: readonly string[];
  readonly systems: readonly SystemResult[];
  readonly ratios: readonly PeerRatio[];
  readonly latencyCurve: readonly LatencyPoint[];
  readonly targets: readonly TargetCheck[];
  readonly notes: readonly string[];
}

export interface BenchReport {
  readonly version: 1;
  readonly mode: 'full' | 'quick';
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly machine: MachineInfo;
  readonly scenarios: readonly ScenarioReport[];
}

export type LoadGeneratorChoice = 'auto' | 'wrk' | 'node';

/** What a scenario gets from the runner: sizes, tools, and owners of everything it starts. */
export interface ScenarioContext {
  readonly quick: boolean;
  readonly loadGenerator: LoadGeneratorChoice;
  /** May the scenario install missing tools (wrk) with apt-get? */
  readonly installMissing: boolean;
  /** Repository root: where `runtime/cli.ts` and `bench/` live. */
  readonly repoRoot: string;
  readonly children: ChildProcesses;
  readonly tempDirs: TempDirs;
  readonly log: (line: string) => void;
}

/** The extension point: a scenario is a name, a title and one `run`. Register it in `scenarios/index.ts`. */
export interface Scenario {
  readonly name: string;
  readonly title: string;
  run(context: ScenarioContext): Promise<ScenarioReport>;
}
