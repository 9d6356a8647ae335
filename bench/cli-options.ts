// Parses `npm run bench -- [scenario ...] [flags]` into options; unknown flags and scenario
// names are errors with the usage text, so a typo never silently runs the wrong thing.

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { LoadGeneratorChoice } from './scenario.ts';

export const USAGE = `usage: npm run bench -- [scenario ...] [options]

scenarios: all when none is named (see --list)

options:
  --quick              tiny sizes: checks the harness end to end in seconds (npm test runs this)
  --load <generator>   auto (default: wrk, installed with apt-get when missing, else Node) | wrk | node
  --no-install         never run apt-get; fall back to the Node generator when wrk is missing
  --out <file>         also write the JSON report to <file>
  --results-dir <dir>  where the JSON report goes (default bench/results, git-ignored)
  --data-root <dir>    parent of the temporary data dirs (default: the OS temp dir; must not be tmpfs)
  --list               print the scenario names and exit
`;

export interface CliOptions {
  readonly scenarios: readonly string[];
  readonly quick: boolean;
  readonly loadGenerator: LoadGeneratorChoice;
  readonly installMissing: boolean;
  readonly out?: string;
  readonly resultsDir?: string;
  readonly dataRoot?: string;
  readonly list: boolean;
}

export function parseCliOptions(argv: readonly string[]): CliOptions {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      quick: { type: 'boolean', default: false },
      load: { type: 'string', default: 'auto' },
      'no-install': { type: 'boolean', default: false },
      out: { type: 'string' },
      'results-dir': { type: 'string' },
      'data-root': { type: 'string' },
      list: { type: 'boolean', default: false },
    },
  });
  const load = values.load;
  if (load !== 'auto' && load !== 'wrk' && load !== 'node') throw new TypeError(`--load must be auto, wrk or node, not "${load}"`);
  return {
    scenarios: positionals,
    quick: values.quick,
    loadGenerator: load,
    installMissing: !values['no-install'],
    list: values.list,
    ...(values.out === undefined ? {} : { out: values.out }),
    ...(values['results-dir'] === undefined ? {} : { resultsDir: values['results-dir'] }),
    // Absolute: the filesystem check (machine.ts) matches mount points, and a relative path matched only `/`.
    ...(values['data-root'] === undefined ? {} : { dataRoot: resolve(values['data-root']) }),
  };
}
