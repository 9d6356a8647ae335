// `npm run bench`: measures Sluice and its peers in one run on this machine, prints the table
// and writes the JSON under bench/results/. Exits 1 when a system or scenario failed to run.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseCliOptions, USAGE, type CliOptions } from './cli-options.ts';
import { renderReport } from './report/render-report.ts';
import { writeResultsFile } from './report/results-file.ts';
import { runBench } from './runner.ts';
import { findScenario, SCENARIOS } from './scenarios/index.ts';
import type { Scenario } from './scenario.ts';

const REPO_ROOT = join(import.meta.dirname, '..');

async function main(argv: readonly string[]): Promise<number> {
  let options: CliOptions;
  try {
    options = parseCliOptions(argv);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    return 2;
  }
  if (options.list) {
    for (const s of SCENARIOS) process.stdout.write(`${s.name.padEnd(12)} ${s.title}\n`);
    return 0;
  }
  const scenarios: Scenario[] = [];
  for (const name of options.scenarios.length === 0 ? SCENARIOS.map((s) => s.name) : options.scenarios) {
    const scenario = findScenario(name);
    if (scenario === undefined) {
      process.stderr.write(`unknown scenario "${name}"; known: ${SCENARIOS.map((s) => s.name).join(', ')}\n`);
      return 2;
    }
    scenarios.push(scenario);
  }
  const report = await runBench({
    scenarios,
    quick: options.quick,
    loadGenerator: options.loadGenerator,
    installMissing: options.installMissing,
    repoRoot: REPO_ROOT,
    ...(options.dataRoot === undefined ? {} : { dataRoot: options.dataRoot }),
    log: (line) => process.stderr.write(`[bench] ${line}\n`),
  });
  process.stdout.write(renderReport(report));
  const file = writeResultsFile(options.resultsDir ?? join(REPO_ROOT, 'bench', 'results'), report);
  if (options.out !== undefined) writeFileSync(options.out, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`\nJSON: ${file}\n`);
  const broken = report.scenarios.some((s) => s.status === 'failed' || s.systems.some((system) => system.status === 'failed'));
  return broken ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
