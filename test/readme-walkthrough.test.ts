// The README's five-minute walkthrough, run in bash as printed against a real `sluice dev` (what
// `npm start` runs): only the address and the data dir are swapped in. A newcomer's first commands
// must keep working at every landing, so a change that breaks one fails here, naming the step.
// "Write your first action" is run the same way, after the walkthrough's step 1.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { ROOT, spawnRuntime, tempDir } from './helpers/runtime.ts';

const README_PATH = join(ROOT, 'README.md');
const README_ADDRESS = '127.0.0.1:8787';
const README_TOKEN_FILE = '.sluice/admin-token';

/** The first bash block under `heading`, split at its numbered step comments (`# 1. ...`). */
function stepsUnder(readme: string, heading: string): Map<number, string> {
  const section = readme.slice(readme.indexOf(heading));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block !== undefined, `README.md has a \`\`\`sh block under "${heading}"`);
  const steps = new Map<number, string>();
  let current: number | undefined;
  for (const line of block.split('\n')) {
    const heading = /^# (\d+)\. /.exec(line);
    if (heading?.[1] !== undefined) current = Number(heading[1]);
    if (current !== undefined) steps.set(current, `${steps.get(current) ?? ''}${line}\n`);
  }
  return steps;
}

/** The README's text with this runtime's address (which must occur) and token file in place of the defaults. */
function localized(text: string, url: string, dataDir: string): string {
  assert.ok(text.includes(README_ADDRESS), `the walkthrough step uses the default address:\n${text}`);
  const host = url.replace(/^http:\/\//, '');
  return text.replaceAll(README_ADDRESS, host).replaceAll(README_TOKEN_FILE, join(dataDir, 'admin-token'));
}

/** Each step's output, from the `@@step N` lines the script prints before it. */
function outputsByStep(stdout: string): Map<number, string> {
  const outputs = new Map<number, string>();
  let current = 0;
  for (const line of stdout.split('\n')) {
    const marker = /^@@step (\d+)$/.exec(line);
    if (marker?.[1] !== undefined) current = Number(marker[1]);
    else outputs.set(current, `${outputs.get(current) ?? ''}${line}\n`);
  }
  return outputs;
}

/** The JSON objects in a step's output, in order: `curl -s` ends none with a newline, so they may share a line. */
function jsonObjects(text: string): Array<Record<string, unknown>> {
  const found: Array<Record<string, unknown>> = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"' && depth > 0) inString = true;
    else if (c === '{' && depth++ === 0) start = i;
    else if (c === '}' && depth > 0 && --depth === 0) found.push(JSON.parse(text.slice(start, i + 1)) as Record<string, unknown>);
  }
  return found;
}

/** Runs the watch step until it has printed `enough` update lines, then stops it as Ctrl-C does. */
async function watchUntil(script: string, env: NodeJS.ProcessEnv, enough: number): Promise<string[]> {
  const child = spawn('bash', ['-c', `set -euo pipefail\n${script}`], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString('utf8')));
  const exited = new Promise<number | string | null>((done) => child.once('exit', (code, signal) => done(code ?? signal)));
  let interrupted = false;
  for await (const line of createInterface({ input: child.stdout })) {
    lines.push(line);
    // One Ctrl-C: a second one ends the watch at once, without its position.
    if (!interrupted && lines.filter((l) => l.includes('"run_id"')).length >= enough) {
      interrupted = true;
      process.kill(-(child.pid ?? 0), 'SIGINT');
    }
  }
  // As in a terminal, bash itself ends by the Ctrl-C once the command it waits for has stopped.
  assert.ok([0, 'SIGINT'].includes((await exited) ?? 'none'), `the watch step ends cleanly on Ctrl-C:\n${lines.join('\n')}\n${errors}`);
  return lines;
}

test('the README walkthrough, steps 1-11 run in bash as printed against `sluice dev`, does what its comments say', async () => {
  const dataDir = tempDir();
  const runtime = await spawnRuntime(dataDir, 'dev', [], 'file');
  try {
    const steps = stepsUnder(readFileSync(README_PATH, 'utf8'), '## A five-minute walkthrough');
    assert.deepEqual([...steps.keys()], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 'the walkthrough has steps 1 to 11');
    assert.ok(steps.get(1)?.includes(README_TOKEN_FILE), 'step 1 reads the admin token from its default file');
    const script = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => `echo; echo '@@step ${n}'\n${steps.get(n)}`).join('\n');
    // What the test checks afterwards: the key for step 10, and the signature header that must not come back.
    const epilogue = `echo; echo '@@step 99'\nprintf 'KEY=%s\\nHDRS=%s\\n' "$KEY" "$HDRS"\n`;
    const run = spawnSync('bash', ['-c', `set -euo pipefail\n${localized(script, runtime.url, dataDir)}\n${epilogue}`], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(run.status, 0, `the walkthrough script failed:\n${run.stdout}\n${run.stderr}`);
    const out = outputsByStep(run.stdout);
    const step = (n: number): string => out.get(n) ?? '';

    const vars = Object.fromEntries(step(99).trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
    assert.match(vars.KEY ?? '', /^sk_[A-Za-z0-9_-]{32}$/, 'step 1 leaves an API key in $KEY');

    assert.equal((jsonObjects(step(2))[0]?.source as { active_secrets?: number } | undefined)?.active_secrets, 1, `step 2 registers the source:\n${step(2)}`);

    assert.match(step(3), /^HTTP\/1\.1 204 No Content/m, `step 3 is accepted:\n${step(3)}`);
    const eventId = /^sluice-event-id: (evt_\w+)/m.exec(step(3))?.[1];
    assert.ok(eventId !== undefined, 'step 3 answers with the event id');

    assert.deepEqual(jsonObjects(step(4))[0], { error: { code: 'duplicate_event', message: 'This event was already received.', original_event_id: eventId } });

    const [listed, shown] = jsonObjects(step(5));
    assert.deepEqual((listed?.events as Array<{ id: string }>).map((e) => e.id), [eventId]);
    assert.equal((shown?.event as { id?: string } | undefined)?.id, eventId, `step 5 shows the newest event:\n${step(5)}`);
    assert.ok('recording' in (shown ?? {}), 'step 5 shows the recorded request');
    const signature = /webhook-signature:v1,(\S+)/.exec(vars.HDRS ?? '')?.[1];
    assert.ok(signature !== undefined && signature.length > 10, 'step 3 signed its request');
    assert.ok(!step(5).includes(signature), 'the recorded request does not show the signature');

    const workflow = jsonObjects(step(6))[0];
    assert.equal((workflow?.workflow as { name?: string } | undefined)?.name, 'notify fulfilment', `step 6 creates the workflow:\n${step(6)}`);

    assert.match(step(7), /^204$/m, `step 7's payment is accepted:\n${step(7)}`);
    const [runs, runView, failed] = jsonObjects(step(7));
    const listedRun = (runs?.runs as Array<{ run_id: string; event_id: string }>)[0];
    assert.ok(listedRun !== undefined && listedRun.event_id !== eventId, 'step 7 lists the run of its own payment first');
    assert.equal((runView?.run as { run_id?: string } | undefined)?.run_id, listedRun.run_id, `step 7 shows that run:\n${step(7)}`);
    assert.deepEqual(failed?.failed_events, [], `step 7 lists failed events (none yet: the run still retries):\n${step(7)}`);
    assert.match(step(7), new RegExp(`run ${listedRun.run_id} \\(workflow \\S+ v1, production\\): \\w+$`, 'm'), `step 7 explains the run:\n${step(7)}`);
    assert.match(step(7), /^ {2}step 1 "notify" \(webhook\): \w+$/m);

    assert.match(String((jsonObjects(step(8))[0]?.schedule as { next_tick_at?: string } | undefined)?.next_tick_at), /^\d{4}-\d\d-\d\dT/, `step 8 schedules a tick:\n${step(8)}`);

    const [ready, ack] = jsonObjects(step(9));
    assert.equal(ready?.type, 'ready', `step 9's device connects:\n${step(9)}`);
    assert.deepEqual([ack?.type, ack?.id, ack?.duplicate], ['ack', 'r-1', false]);

    const watchScript = localized(steps.get(10) ?? '', runtime.url, dataDir);
    const watched = await watchUntil(watchScript, { ...process.env, KEY: vars.KEY }, 2);
    const updates = jsonObjects(watched.join('\n'));
    assert.deepEqual(updates.slice(0, 2).map((u) => [u.state, u.seq]), [['queued', 1], ['running', 2]], watched.join('\n'));
    assert.equal(updates.at(-1)?.stopped, true, 'Ctrl-C prints where to resume from');

    // The export goes to the data dir instead of the checkout.
    const exported = join(dataDir, 'acct-lumen.ndjson');
    const exportScript = localized(steps.get(11) ?? '', runtime.url, dataDir).replaceAll('acct-lumen.ndjson', exported);
    const exportRun = spawnSync('bash', ['-c', `set -euo pipefail\n${exportScript}`], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, KEY: vars.KEY } });
    assert.equal(exportRun.status, 0, `step 11 failed:\n${exportRun.stdout}\n${exportRun.stderr}`);
    assert.match(exportRun.stdout, /^\{"kind":"export","format":1,"organization_id":"acct-lumen","exported_a\n\{"kind":"organization","organization":\{"id":"acct-lumen","name":"Lumen\n\{"kind":"end"\}\n$/, exportRun.stdout);
    const kinds = new Set(readFileSync(exported, 'utf8').trimEnd().split('\n').map((line) => (JSON.parse(line) as { kind: string }).kind));
    for (const kind of ['api_key', 'source', 'schedule', 'device', 'workflow', 'event', 'run']) assert.ok(kinds.has(kind), `step 11 exports the ${kind}s of the walkthrough`);
  } finally {
    runtime.child.kill('SIGTERM');
    await runtime.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the README\'s "Write your first action", run in bash as printed after walkthrough step 1, ends with the projection row', { timeout: 300_000 }, async () => {
  const dataDir = tempDir();
  const buildDir = tempDir('sluice-readme-kit-');
  const runtime = await spawnRuntime(dataDir, 'dev', [], 'file');
  try {
    const readme = readFileSync(README_PATH, 'utf8');
    const first = stepsUnder(readme, '## A five-minute walkthrough').get(1) ?? '';
    const action = [...stepsUnder(readme, '### Write your first action').values()].join('');
    // The kit builds into a temp dir instead of the checkout's kits/build/.
    assert.ok(action.includes('node kits/build.mjs assemblyscript') && action.includes('kits/build/'), action);
    const built = action.replace('node kits/build.mjs assemblyscript', `node kits/build.mjs assemblyscript --out ${buildDir}`).replaceAll('kits/build/', `${buildDir}/`);
    const script = `${localized(first, runtime.url, dataDir)}\n${localized(built, runtime.url, dataDir)}`;
    const run = spawnSync('bash', ['-c', `set -euo pipefail\n${script}`], { cwd: ROOT, encoding: 'utf8', timeout: 240_000 });
    assert.equal(run.status, 0, `the script failed:\n${run.stdout}\n${run.stderr}`);
    const answers = jsonObjects(run.stdout);
    const simulated = answers.find((answer) => 'outcome' in answer);
    assert.equal(simulated?.outcome, 'output', `simulate runs the action:\n${run.stdout}`);
    const dataOf = (projection: unknown) => (projection as { data?: { threshold_source?: string } } | undefined)?.data;
    assert.equal(dataOf((simulated?.output as { projection?: unknown } | undefined)?.projection)?.threshold_source, 'default', 'simulate runs without secrets');
    const row = answers.at(-1)?.row as { status?: string; entity_id?: string; data?: unknown } | undefined;
    assert.deepEqual([row?.entity_id, row?.status, dataOf(row)?.threshold_source], ['ord_1', 'held_for_review', 'secret'], `the last command prints the row the run wrote:\n${run.stdout}`);
  } finally {
    runtime.child.kill('SIGTERM');
    await runtime.exited;
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(buildDir, { recursive: true, force: true });
  }
});
