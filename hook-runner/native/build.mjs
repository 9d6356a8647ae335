// Builds the wasmtime sandbox addon (this folder's Rust crate) with cargo and installs it
// as sluice-sandbox.node beside this file. Run by `npm install` (postinstall).
//
// The cargo target dir defaults to a cache OUTSIDE the clone ($CARGO_TARGET_DIR, else
// $XDG_CACHE_HOME/sluice/cargo-target, else ~/.cache/sluice/cargo-target), so a fresh
// clone on the same machine reuses the compiled wasmtime and only rebuilds this crate.
// SLUICE_SKIP_NATIVE_BUILD=1 skips the build (the sandbox then reports itself unavailable).
//
// Sharing a target dir between clones has one trap: a cdylib's file name carries no
// hash, so clone B's build overwrites clone A's library while A's fingerprint still
// says fresh, and A would install B's code. A stamp names the clone that built last;
// when it is another clone, this crate alone is cleaned and rebuilt (seconds).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MIN_RUST = [1, 95];
const here = dirname(fileURLToPath(import.meta.url));
const output = join(here, 'sluice-sandbox.node');

function fail(message) {
  console.error(`\nsluice: ${message}\n`);
  process.exit(1);
}

function cargoVersion() {
  const probe = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    fail(
      'cannot build the WebAssembly sandbox addon: `cargo` was not found on PATH.\n' +
        `  Prerequisite: Rust ${MIN_RUST.join('.')}+ with cargo (install with rustup: https://rustup.rs),\n` +
        '  then run `npm install` again. (SLUICE_SKIP_NATIVE_BUILD=1 skips this build; the\n' +
        '  hook-runner cannot run custom actions without it.)',
    );
  }
  const match = /cargo (\d+)\.(\d+)\.(\d+)/.exec(probe.stdout);
  if (!match) fail(`could not read the cargo version from: ${probe.stdout.trim()}`);
  const [major, minor] = [Number(match[1]), Number(match[2])];
  if (major < MIN_RUST[0] || (major === MIN_RUST[0] && minor < MIN_RUST[1])) {
    fail(
      `the WebAssembly sandbox addon needs Rust ${MIN_RUST.join('.')}+ with cargo; found ${probe.stdout.trim()}.\n` +
        '  Update with `rustup update stable`, then run `npm install` again.',
    );
  }
  return probe.stdout.trim();
}

function targetDir() {
  if (process.env.CARGO_TARGET_DIR) return process.env.CARGO_TARGET_DIR;
  const cache = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(cache, 'sluice', 'cargo-target');
}

function libraryName() {
  switch (process.platform) {
    case 'darwin':
      return 'libsluice_sandbox.dylib';
    case 'win32':
      return 'sluice_sandbox.dll';
    default:
      return 'libsluice_sandbox.so';
  }
}

if (process.env.SLUICE_SKIP_NATIVE_BUILD === '1') {
  console.log('sluice: SLUICE_SKIP_NATIVE_BUILD=1, not building the WebAssembly sandbox addon');
  process.exit(0);
}

const version = cargoVersion();
const target = targetDir();
mkdirSync(target, { recursive: true });
console.log(`sluice: building the WebAssembly sandbox addon with ${version} (target dir ${target})`);
const started = Date.now();
const cargoEnv = { ...process.env, CARGO_TARGET_DIR: target };
const manifest = join(here, 'Cargo.toml');
const stamp = join(target, 'sluice-sandbox.last-builder');
const lastBuilder = existsSync(stamp) ? readFileSync(stamp, 'utf8') : '';
if (lastBuilder !== here) {
  const clean = spawnSync(
    'cargo',
    ['clean', '--release', '--locked', '-p', 'sluice-sandbox', '--manifest-path', manifest],
    { stdio: 'inherit', env: cargoEnv },
  );
  if (clean.status !== 0) fail(`cargo clean -p sluice-sandbox failed (exit ${clean.status ?? clean.signal})`);
}
const build = spawnSync(
  'cargo',
  ['build', '--release', '--locked', '--manifest-path', manifest],
  { stdio: 'inherit', env: cargoEnv },
);
if (build.error) fail(`could not run cargo: ${build.error.message}`);
if (build.status !== 0) {
  fail(`cargo build of the WebAssembly sandbox addon failed (exit ${build.status ?? build.signal}); see the output above.`);
}
const built = join(target, 'release', libraryName());
if (!existsSync(built)) fail(`cargo finished but ${built} is missing`);
writeFileSync(stamp, here);
// Copy then rename, so a running process never loads a half-written addon.
const staging = join(here, `.sluice-sandbox.${process.pid}.tmp.node`);
copyFileSync(built, staging);
renameSync(staging, output);
console.log(`sluice: sandbox addon ready at ${output} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
