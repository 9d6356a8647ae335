// Runs kits/build.mjs (the same build users and CI run) into a temp dir for the kit tests and
// turns its `--json` summary into typed data: the modules built, the toolchains missing.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const KIT_NAMES = ['assemblyscript', 'rust', 'c'] as const;
export type KitName = (typeof KIT_NAMES)[number];

export interface BuiltModule {
  readonly kit: KitName;
  readonly example: string;
  readonly path: string;
}

export interface BuildProblem {
  readonly kit: string;
  readonly example: string;
  readonly kind: string;
  readonly message: string;
  /** What to install, e.g. `apt-get install -y clang lld`. */
  readonly packages: string;
}

export interface KitBuild {
  readonly built: readonly BuiltModule[];
  readonly problems: readonly BuildProblem[];
  /** The script's human-readable log (stderr). */
  readonly log: string;
}

const REPO_DIR = fileURLToPath(new URL('../..', import.meta.url));
const BUILD_SCRIPT = fileURLToPath(new URL('../../kits/build.mjs', import.meta.url));

const isKitName = (value: unknown): value is KitName => KIT_NAMES.some((name) => name === value);
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;
const text = (record: Record<string, unknown>, key: string): string => {
  const value = record[key];
  if (typeof value !== 'string') throw new TypeError(`build summary: ${key} is not a string`);
  return value;
};

function parseSummary(stdout: string, log: string): KitBuild {
  const line = stdout.trim().split('\n').pop() ?? '';
  let summary: unknown;
  try {
    summary = JSON.parse(line);
  } catch {
    throw new Error(`kits/build.mjs printed no JSON summary; its log:\n${log}`);
  }
  if (!isRecord(summary) || !Array.isArray(summary['built']) || !Array.isArray(summary['problems'])) {
    throw new TypeError(`kits/build.mjs printed an unexpected summary: ${line}`);
  }
  const built = summary['built'].filter(isRecord).map((entry): BuiltModule => {
    const kit = entry['kit'];
    if (!isKitName(kit)) throw new TypeError(`build summary: unknown kit ${String(kit)}`);
    return { kit, example: text(entry, 'example'), path: text(entry, 'path') };
  });
  const problems = summary['problems'].filter(isRecord).map(
    (entry): BuildProblem => ({
      kit: text(entry, 'kit'),
      example: text(entry, 'example'),
      kind: text(entry, 'kind'),
      message: text(entry, 'message'),
      packages: text(entry, 'packages'),
    }),
  );
  return { built, problems, log };
}

export interface BuildOptions {
  /** Only these kits (default: all). */
  readonly kits?: readonly KitName[];
  /** Extra environment, e.g. SLUICE_RUSTC / SLUICE_CLANG overrides. */
  readonly env?: Readonly<Record<string, string>>;
}

/** Builds the kit examples into `outDir`; resolves even when some kit failed (see problems). */
export function buildKits(outDir: string, options: BuildOptions = {}): Promise<KitBuild> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BUILD_SCRIPT, '--out', outDir, '--json', ...(options.kits ?? [])],
      { cwd: REPO_DIR, env: { ...process.env, ...options.env }, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 },
      (error, stdout, stderr) => {
        // Exit status 1 means "some kit failed" and still prints the summary.
        if (error && error.code !== 1) {
          reject(new Error(`kits/build.mjs did not run: ${error.message}\n${stderr}`));
          return;
        }
        try {
          resolve(parseSummary(stdout, stderr));
        } catch (parseError) {
          reject(parseError);
        }
      },
    );
  });
}
