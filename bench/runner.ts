// Runs the chosen scenarios one after another and assembles the BenchReport; owns the run's
// child processes and temp dirs, and stops/removes them however the run ends (including Ctrl-C).

import { failedResult } from './result-helpers.ts';
import { ChildProcesses } from './harness/children.ts';
import { TempDirs } from './harness/temp-dirs.ts';
import { describeMachine } from './machine.ts';
import type { BenchReport, LoadGeneratorChoice, Scenario, ScenarioContext, ScenarioReport } from './scenario.ts';

export interface BenchOptions {
  readonly scenarios: readonly Scenario[];
  readonly quick: boolean;
  readonly loadGenerator: LoadGeneratorChoice;
  readonly installMissing: boolean;
  readonly repoRoot: string;
  readonly dataRoot?: string;
  readonly log: (line: string) => void;
}

export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const startedAt = new Date().toISOString();
  const tempDirs = new TempDirs(options.dataRoot);
  const children = new ChildProcesses();
  const machine = describeMachine(tempDirs.root, options.quick ? 50 : 500);
  // Signals cannot wait for a graceful stop: kill the process groups, remove the dirs, leave.
  const abort = (signal: NodeJS.Signals): void => {
    children.killAllNow();
    tempDirs.removeAll();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  const onExit = (): void => children.killAllNow();
  process.once('SIGINT', abort);
  process.once('SIGTERM', abort);
  process.once('exit', onExit);
  const context: ScenarioContext = {
    quick: options.quick,
    loadGenerator: options.loadGenerator,
    installMissing: options.installMissing,
    repoRoot: options.repoRoot,
    children,
    tempDirs,
    log: options.log,
  };
  const reports: ScenarioReport[] = [];
  try {
    for (const scenario of options.scenarios) {
      options.log(`scenario ${scenario.name}: ${scenario.title}`);
      reports.push(await runScenario(scenario, context));
      await children.stopAll();
    }
  } finally {
    await children.stopAll();
    tempDirs.removeAll();
    process.off('SIGINT', abort);
    process.off('SIGTERM', abort);
    process.off('exit', onExit);
  }
  return {
    version: 1,
    mode: options.quick ? 'quick' : 'full',
    startedAt,
    finishedAt: new Date().toISOString(),
    machine,
    scenarios: reports,
  };
}

/** A scenario that throws still yields a report row, marked failed, so one broken scenario hides no other. */
async function runScenario(scenario: Scenario, context: ScenarioContext): Promise<ScenarioReport> {
  try {
    return await scenario.run(context);
  } catch (error) {
    return {
      scenario: scenario.name,
      title: scenario.title,
      status: 'failed',
      unit: '',
      method: [],
      systems: [failedResult({ system: 'harness', label: 'harness', role: 'subject', work: 'running the scenario' }, error)],
      ratios: [],
      latencyCurve: [],
      targets: [],
      notes: [],
    };
  }
}
