// `sluice export` against a real runtime: it writes every page's lines, exactly as the API sends them,
// ending with {"kind":"end"}; when a page fails it says why and which --cursor goes on from there,
// and the run that goes on writes the rest, so that the two outputs together are the whole export;
// an output that fails (a full disk) is said with the cursor of the page it failed on, and one that
// nobody reads any more (`| head`) ends it quietly; Ctrl-C finishes the page being written and names
// the cursor to go on from; usage mistakes are usage errors, and a key without the admin role is
// told it needs one.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { PassThrough, Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { exportCommand } from '../runtime/export-command.ts';
import { call, createOrg } from './helpers/http.ts';
import { capturedOutput } from './helpers/captured-output.ts';
import { eventually } from './helpers/receiver.ts';
import { ADMIN_TOKEN, ROOT, startRuntime, type TestRuntime } from './helpers/runtime.ts';

const ORG = 'acct-export-cli';
/** More than one page of 500. */
const EVENTS = 620;
/**
 * Each event's filler: a page of 500 (~1 MB) must be far past what a child's stdout holds unread,
 * or the Ctrl-C tests' child finishes before its signal. Node gives a child a socketpair, not a
 * pipe: ~208 KiB (net.core.wmem_default) plus the parent's read buffer, not a pipe's 64 KiB.
 */
const NOTE = 'x'.repeat(2_000);
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  for (let batch = 0; batch < EVENTS; batch += 20) {
    await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'meter.read', payload: { n: batch + i, note: NOTE }, id: `read-${batch + i}` } });
      assert.equal(sent.status, 202, sent.text);
    }));
  }
});
after(async () => {
  await rt.close();
});

/** The export's lines as the API pages them (trailers dropped, the last page's `end` kept). */
async function apiLines(): Promise<string[]> {
  const lines: string[] = [];
  let cursor = '';
  for (;;) {
    const page = (await call(rt.url, 'GET', `/organizations/${ORG}/export?limit=500${cursor === '' ? '' : `&cursor=${cursor}`}`, { token: key })).text.trimEnd().split('\n');
    const trailer = JSON.parse(page.at(-1)!) as { kind: string; next_cursor: string };
    if (trailer.kind === 'end') return [...lines, ...page];
    lines.push(...page.slice(0, -1));
    cursor = trailer.next_cursor;
  }
}

/** Every line but the header, whose time is the moment the export began. */
const withoutHeader = (lines: readonly string[]): string[] => lines.filter((line) => !line.startsWith('{"kind":"export"'));

test('export writes every page, as the API sends it, ending with the end line', async () => {
  const output = capturedOutput();
  const code = await exportCommand([rt.url, '--org', ORG], { stdout: output.stdout, stderr: output.stderr, env: { SLUICE_API_KEY: key } });
  assert.equal(code, 0, output.err());
  const lines = output.out().trimEnd().split('\n');
  assert.equal(lines.at(-1), '{"kind":"end"}');
  assert.equal(lines.filter((line) => line.startsWith('{"kind":"event"')).length, EVENTS);
  assert.ok(!lines.some((line) => line.startsWith('{"kind":"more"')));
  assert.deepEqual(withoutHeader(lines), withoutHeader(await apiLines()));
  assert.equal(output.err(), `sluice export: ${lines.length} lines of ${ORG} written.\n`);
});

test('a page that fails names the cursor that goes on from it, and going on completes the export', async () => {
  const { body: second } = await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: key, json: { role: 'admin' } });
  // Nothing reads stdout at first: the command waits there after its first page, while the key it uses is revoked.
  const stdout = new PassThrough();
  const stderr = capturedOutput().stderr;
  let err = '';
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const running = exportCommand([rt.url, '--org', ORG], { stdout, stderr, env: { SLUICE_API_KEY: second.key } });
  await eventually('the first page written', () => stdout.writableLength, (length) => length > 0);
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${second.id}`, { token: key })).status, 200);
  let out = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  assert.equal(await running, 1);
  const match = /^sluice export: 401 unauthorized: .*; 500 lines were written\. To go on from the page that failed, run again with --cursor (\S+) and append \(>>\) to what was written\.\n$/.exec(err);
  assert.ok(match, err);
  assert.equal(out.trimEnd().split('\n').length, 500);

  const rest = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG, '--cursor', match[1]!], { stdout: rest.stdout, stderr: rest.stderr, env: { SLUICE_API_KEY: key } }), 0, rest.err());
  const together = `${out}${rest.out()}`.trimEnd().split('\n');
  // The key revoked meanwhile was exported (on the first page) as it was then: a walk, not a snapshot.
  const apart = (lines: readonly string[]) => withoutHeader(lines).map((line) => line.replace(/,"revoked_at":"[^"]+"/, ''));
  assert.deepEqual(apart(together), apart(await apiLines()));
});

test('usage mistakes are usage errors; a key without the admin role is told it needs one', async () => {
  const io = capturedOutput();
  const env = { SLUICE_API_KEY: key };
  await assert.rejects(exportCommand([rt.url, '--org', ORG, '--environment', 'sandbox'], { ...io, env }), /--environment does not apply/);
  await assert.rejects(exportCommand([rt.url, '--org', ORG, '--cursor', ''], { ...io, env }), /--cursor is empty/);
  await assert.rejects(exportCommand([rt.url], { ...io, env }), /--org and an API key/);
  const viewer = (await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: key, json: { role: 'viewer' } })).body.key as string;
  const refused = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG], { stdout: refused.stdout, stderr: refused.stderr, env: { SLUICE_API_KEY: viewer } }), 1);
  assert.equal(refused.out(), '');
  assert.match(refused.err(), /^sluice export: 403 forbidden: This action needs the admin role; the key has viewer \(an export needs an admin key\); 0 lines were written\.\n$/);
  const badCursor = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG, '--cursor', 'nope'], { stdout: badCursor.stdout, stderr: badCursor.stderr, env }), 1);
  // Not told to go on from the cursor just refused; one sentence, no ".;" where two met.
  assert.match(badCursor.err(), /^sluice export: 400 invalid_cursor: [^\n]*[^.]; 0 lines were written\.\n$/);
  assert.doesNotMatch(badCursor.err(), /run again with --cursor/);
  // A cursor that would drive the terminal is not echoed as it is.
  const hostile = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG, '--cursor', 'x\u001b[2Jy'], { stdout: hostile.stdout, stderr: hostile.stderr, env }), 1);
  assert.ok(!hostile.err().includes('\u001b'), hostile.err());
});

/** An output that takes `taken` writes, then fails every other with `code`. */
function failingOutput(taken: number, code: string): { output: Writable; text: () => string } {
  let text = '';
  let writes = 0;
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (writes++ >= taken) return done(Object.assign(new Error(`write ${code}`), { code }));
      text += chunk.toString('utf8');
      done();
    },
  });
  return { output, text: () => text };
}

test('an output that fails says so with the cursor of the page it failed on; going on from it completes the export', async () => {
  const full = failingOutput(1, 'ENOSPC');
  const err = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG], { stdout: full.output, stderr: err.stderr, env: { SLUICE_API_KEY: key } }), 1);
  const match = /^sluice export: writing the output failed \(write ENOSPC\); 500 lines were written before the page that failed, which may have been written in part: cut what follows the last of them\. To go on from the page that failed, run again with --cursor (\S+) and append \(>>\) to what was written\.\n$/.exec(err.err());
  assert.ok(match, err.err());
  const rest = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG, '--cursor', match[1]!], { stdout: rest.stdout, stderr: rest.stderr, env: { SLUICE_API_KEY: key } }), 0, rest.err());
  assert.deepEqual(withoutHeader(`${full.text()}${rest.out()}`.trimEnd().split('\n')), withoutHeader(await apiLines()));

  // Nobody reading any more is no failure: the export stops asking for pages.
  const closed = failingOutput(0, 'EPIPE');
  const quiet = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG], { stdout: closed.output, stderr: quiet.stderr, env: { SLUICE_API_KEY: key } }), 0);
  assert.equal(quiet.err(), '');
});

/** Runs a bash command line (without blocking: the runtime answers from this process). */
const bash = (line: string): Promise<{ status: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile('bash', ['-c', line], { cwd: ROOT, encoding: 'utf8' }, (error, stdout, stderr) => resolve({ status: typeof error?.code === 'number' ? error.code : error === null ? 0 : -1, stdout, stderr }));
  });

test('the sluice command: to a full disk it exits 1 naming the cursor, into `| head` it ends quietly', async () => {
  const cli = `SLUICE_API_KEY=${key} node --import tsx ${ROOT}/runtime/cli.ts export ${rt.url} --org ${ORG}`;
  const toFull = await bash(`${cli} > /dev/full`);
  assert.equal(toFull.status, 1, toFull.stderr);
  assert.match(toFull.stderr, /^sluice export: writing the output failed \(ENOSPC: no space left on device, write\); 0 lines were written before the page that failed/);
  const intoHead = await bash(`set -o pipefail; ${cli} | head -n 2`);
  assert.equal(intoHead.status, 0, intoHead.stderr);
  assert.equal(intoHead.stderr, '');
  assert.equal(intoHead.stdout.split('\n').length, 3);
});

test('the sluice command: Ctrl-C finishes the page being written, names the cursor to go on from, and going on completes the export', async () => {
  const child = spawn('node', ['--import', 'tsx', `${ROOT}/runtime/cli.ts`, 'export', rt.url, '--org', ORG], { cwd: ROOT, env: { ...process.env, SLUICE_API_KEY: key } });
  let err = '';
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  // Nothing reads stdout yet: the first page (far past what the socket holds) waits there, part written.
  const firstBytes = await new Promise<Buffer>((resolve) => child.stdout.once('readable', () => resolve(child.stdout.read(1) as Buffer)));
  child.stdout.pause();
  child.kill('SIGINT');
  let out = firstBytes.toString('utf8');
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stdout.resume();
  assert.equal(await exited, 1, err);
  const match = /^sluice export: stopped; 500 lines were written\. To go on from where it stopped, run again with --cursor (\S+) and append \(>>\) to what was written\.\n$/.exec(err);
  assert.ok(match, err);
  assert.ok(out.endsWith('\n') && out.trimEnd().split('\n').length === 500, 'the page under way was written whole');

  const rest = capturedOutput();
  assert.equal(await exportCommand([rt.url, '--org', ORG, '--cursor', match[1]!], { stdout: rest.stdout, stderr: rest.stderr, env: { SLUICE_API_KEY: key } }), 0, rest.err());
  assert.deepEqual(withoutHeader(`${out}${rest.out()}`.trimEnd().split('\n')), withoutHeader(await apiLines()));
});

test('the sluice command: a second Ctrl-C ends an export whose output is never read (the page under way would wait for ever)', async () => {
  const child = spawn('node', ['--import', 'tsx', `${ROOT}/runtime/cli.ts`, 'export', rt.url, '--org', ORG], { cwd: ROOT, env: { ...process.env, SLUICE_API_KEY: key } });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  // The first page waits in a pipe nobody reads: the first Ctrl-C asks it to finish, which it cannot.
  await new Promise<void>((resolve) => child.stdout.once('readable', () => resolve()));
  child.stdout.pause();
  child.kill('SIGINT');
  let ended = false;
  void exited.then(() => (ended = true));
  try {
    // Ctrl-C again until it ends (a signal sent before the first was handled is taken as the first).
    await eventually('the export ended by a second Ctrl-C', () => ended || !child.kill('SIGINT'), Boolean, 15_000);
    assert.equal(await exited, 'SIGINT');
  } finally {
    // A failure leaves no export running (it would hold the file open).
    child.kill('SIGKILL');
  }
});
