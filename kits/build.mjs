#!/usr/bin/env node
// Builds every verified kit example (AssemblyScript, Rust, C) into kits/build/<example>-<kit>.wasm
// and checks each is import-free; a missing toolchain is named with the Debian package to install.
//
//   node kits/build.mjs [--out DIR] [--json] [assemblyscript] [rust] [c]
//
// Exit status 0 only when every requested kit built. `--json` prints one summary line on stdout
// (`{"built":[...],"problems":[...]}`) after the human-readable lines on stderr.
// Toolchain overrides: SLUICE_RUSTC (a rustc that has the wasm32-unknown-unknown std; default:
// Debian's /usr/bin/rustc, then rustc on PATH), SLUICE_CLANG (a clang that targets wasm32; wasm-ld
// must be on PATH or next to it).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const KITS_DIR = dirname(fileURLToPath(import.meta.url));
const REPO_DIR = resolve(KITS_DIR, '..');

/** The kits this script builds, with the packages CI needs for each. */
const KITS = {
  assemblyscript: { packages: 'npm install (devDependency assemblyscript)', build: buildAssemblyScript },
  rust: { packages: 'apt-get install -y rustc libstd-rust-dev-wasm32', build: buildRust },
  c: { packages: 'apt-get install -y clang lld', build: buildC },
};

class ToolchainMissing extends Error {}
class BuildFailed extends Error {}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', cwd: REPO_DIR, timeout: 300_000, ...options });
  return { ok: !result.error && result.status === 0, missing: result.error?.code === 'ENOENT', ...result };
}

function runOrFail(what, command, args, options) {
  const result = run(command, args, options);
  if (!result.ok) {
    const output = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim() || String(result.error ?? `exit ${result.status}`);
    throw new BuildFailed(`${what} failed: ${command} ${args.join(' ')}\n${output}`);
  }
  return result;
}

function examplesOf(kit) {
  const dir = join(KITS_DIR, kit, 'examples');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((name) => statSync(join(dir, name)).isDirectory()).sort();
}

// ---- AssemblyScript ------------------------------------------------------------------------

function findAsc() {
  try {
    const require = createRequire(join(REPO_DIR, 'package.json'));
    const pkgPath = require.resolve('assemblyscript/package.json');
    const bin = JSON.parse(readFileSync(pkgPath, 'utf8')).bin.asc;
    return join(dirname(pkgPath), bin);
  } catch {
    throw new ToolchainMissing(
      'the AssemblyScript compiler (npm package assemblyscript) is not installed; run `npm install` at the repository root',
    );
  }
}

function buildAssemblyScript(example, outDir) {
  const asc = findAsc();
  const entry = join(KITS_DIR, 'assemblyscript', 'examples', example, 'assembly', 'index.ts');
  const output = join(outDir, `${example}-assemblyscript.wasm`);
  // --runtime stub: bump allocation, no GC; --use abort=: no `env.abort` import.
  runOrFail('asc', process.execPath, [asc, entry, '--runtime', 'stub', '--use', 'abort=', '-O3', '-o', output]);
  return output;
}

// ---- Rust ----------------------------------------------------------------------------------

/** A rustc whose sysroot holds the wasm32-unknown-unknown standard library (core at least). */
function findRustc() {
  // An explicit SLUICE_RUSTC is the only candidate, so a wrong override is reported, not bypassed.
  const candidates = process.env.SLUICE_RUSTC ? [process.env.SLUICE_RUSTC] : ['/usr/bin/rustc', 'rustc'];
  const tried = [];
  for (const rustc of candidates) {
    const result = run(rustc, ['--print', 'target-libdir', '--target', 'wasm32-unknown-unknown']);
    const libdir = result.ok ? result.stdout.trim() : '';
    const hasCore = libdir !== '' && existsSync(libdir) && readdirSync(libdir).some((f) => /^libcore-.*\.rlib$/.test(f));
    if (hasCore) return rustc;
    tried.push(result.missing ? `${rustc} (not found)` : `${rustc} (no wasm32-unknown-unknown std)`);
  }
  throw new ToolchainMissing(
    `no rustc with the wasm32-unknown-unknown standard library (tried ${tried.join(', ')}); ` +
      'on Debian: apt-get install -y rustc libstd-rust-dev-wasm32 (or with rustup: rustup target add wasm32-unknown-unknown)',
  );
}

const RUST_FLAGS = ['--edition', '2021', '--target', 'wasm32-unknown-unknown', '-C', 'opt-level=s', '-C', 'panic=abort'];

function buildRust(example, outDir) {
  const rustc = findRustc();
  const depsDir = join(outDir, '.rust-deps');
  mkdirSync(depsDir, { recursive: true });
  const kitRlib = join(depsDir, 'libsluice_action.rlib');
  runOrFail('rustc (sluice-action kit)', rustc, [
    ...RUST_FLAGS,
    '--crate-type', 'rlib',
    '--crate-name', 'sluice_action',
    join(KITS_DIR, 'rust', 'src', 'lib.rs'),
    '-o', kitRlib,
  ]);
  const output = join(outDir, `${example}-rust.wasm`);
  runOrFail(`rustc (${example})`, rustc, [
    ...RUST_FLAGS,
    '--crate-type', 'cdylib',
    '--crate-name', example.replaceAll('-', '_'),
    '-C', 'lto',
    // rustc's default 1 MiB shadow stack would take a tenth of the sandbox's 10 MiB.
    '-C', 'link-arg=-zstack-size=262144',
    '--extern', `sluice_action=${kitRlib}`,
    '-L', `dependency=${depsDir}`,
    join(KITS_DIR, 'rust', 'examples', example, 'src', 'lib.rs'),
    '-o', output,
  ]);
  return output;
}

// ---- C ---------------------------------------------------------------------------------------

function findClang() {
  const clang = process.env.SLUICE_CLANG ?? 'clang';
  if (run(clang, ['--version']).missing) {
    throw new ToolchainMissing(`${clang} not found; on Debian: apt-get install -y clang lld`);
  }
  return clang;
}

/**
 * clang's flags for a C action (kits/c/README.md says why each). `--stack-first` puts the stack
 * below the static data, so an overflow traps instead of overwriting it. Exported for the kit tests.
 */
export const C_FLAGS = [
  '--target=wasm32', '-O2', '-std=c11', '-Wall', '-Wextra', '-Werror',
  '-ffreestanding', '-nostdlib', '-mbulk-memory',
  '-Wl,--no-entry', '-Wl,--stack-first', '-Wl,--export=alloc', '-Wl,--export=execute',
];

function buildC(example, outDir) {
  const clang = findClang();
  const dir = join(KITS_DIR, 'c', 'examples', example);
  const sources = readdirSync(dir).filter((f) => f.endsWith('.c')).sort().map((f) => join(dir, f));
  const output = join(outDir, `${example}-c.wasm`);
  const args = [...C_FLAGS, ...sources, '-o', output];
  const result = run(clang, args);
  if (!result.ok) {
    const text = `${result.stdout ?? ''}${result.stderr ?? ''}`;
    if (/wasm-ld/.test(text) && /(not found|doesn't exist|No such file)/i.test(text)) {
      throw new ToolchainMissing(`wasm-ld (LLVM's WebAssembly linker) not found; on Debian: apt-get install -y lld\n${text.trim()}`);
    }
    if (/unknown target|No available targets/i.test(text)) {
      throw new ToolchainMissing(`${clang} cannot target wasm32; on Debian: apt-get install -y clang lld\n${text.trim()}`);
    }
    throw new BuildFailed(`clang (${example}) failed: ${clang} ${args.join(' ')}\n${text.trim()}`);
  }
  return output;
}

// ---- main ------------------------------------------------------------------------------------

/** The sandbox refuses any import; refuse it here first, with the import names. */
function checkNoImports(path) {
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(path)));
  if (imports.length > 0) {
    const names = imports.map((i) => `${i.module}.${i.name}`).join(', ');
    throw new BuildFailed(`${relative(REPO_DIR, path)} imports ${names}; the sandbox accepts only import-free modules`);
  }
}

function parseArgs(argv) {
  const options = { outDir: join(KITS_DIR, 'build'), json: false, kits: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--out') options.outDir = resolve(argv[++i] ?? '');
    else if (arg === '--json') options.json = true;
    else if (arg in KITS) options.kits.push(arg);
    else if (arg === 'go') options.go = true;
    else {
      console.error(`unknown argument ${arg}; usage: node kits/build.mjs [--out DIR] [--json] [${Object.keys(KITS).join('] [')}]`);
      process.exit(2);
    }
  }
  options.all = options.kits.length === 0 && options.go !== true;
  if (options.all) options.kits = Object.keys(KITS);
  return options;
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  mkdirSync(options.outDir, { recursive: true });
  const built = [];
  const problems = [];
  for (const kit of options.kits) {
    for (const example of examplesOf(kit)) {
      try {
        const path = KITS[kit].build(example, options.outDir);
        checkNoImports(path);
        const bytes = statSync(path).size;
        built.push({ kit, example, path, bytes });
        console.error(`ok      ${kit} ${example} -> ${relative(process.cwd(), path)} (${bytes} bytes)`);
      } catch (error) {
        if (!(error instanceof ToolchainMissing || error instanceof BuildFailed)) throw error;
        const kind = error instanceof ToolchainMissing ? 'missing_toolchain' : 'build_failed';
        problems.push({ kit, example, kind, message: error.message, packages: KITS[kit].packages });
        console.error(`${kind === 'missing_toolchain' ? 'MISSING' : 'FAILED '} ${kit} ${example}: ${error.message}`);
      }
    }
  }
  // When every kit was asked for, or Go by name: `node kits/build.mjs c` says nothing of Go.
  if (options.all || options.go) console.error('skipped go: the TinyGo kit is unverified (TinyGo is not installed here); see kits/go/README.md');
  if (options.json) console.log(JSON.stringify({ built, problems }));
  process.exitCode = problems.length === 0 ? 0 : 1;
}

// Run as a script (not when a test imports C_FLAGS).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
