// Writes the run's JSON under bench/results/ (git-ignored): one timestamped file per run,
// plus latest.json, so a person or a script can compare runs without parsing the table.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchReport } from '../scenario.ts';

/** Returns the timestamped file's path. */
export function writeResultsFile(resultsDir: string, report: BenchReport): string {
  mkdirSync(resultsDir, { recursive: true });
  const stamp = report.startedAt.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z');
  const file = join(resultsDir, `bench-${report.mode}-${stamp}.json`);
  const text = `${JSON.stringify(report, null, 2)}\n`;
  writeFileSync(file, text);
  writeFileSync(join(resultsDir, 'latest.json'), text);
  return file;
}
