// Ctrl-C for the CLI's long commands: the first signal stops the command, a copy within
// SAME_CTRL_C_MS (npm passes the terminal's Ctrl-C on to its child, which had it already) changes
// nothing, and a later one ends the process by that signal, every listener gone first. And the real
// `npm run sluice -- watch`, Ctrl-C'd as a terminal does (its whole process group), prints where to
// resume from every time.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { onInterrupt, SAME_CTRL_C_MS } from '../runtime/interrupt-signals.ts';
import { call, createOrg } from './helpers/http.ts';
import { ADMIN_TOKEN, ROOT, startRuntime } from './helpers/runtime.ts';

test('the first signal stops; its copy within the window changes nothing; a later one ends the process by it', () => {
  const target = new EventEmitter();
  let nowMs = 0;
  let stops = 0;
  const ended: string[] = [];
  onInterrupt(['SIGINT', 'SIGTERM'], () => stops++, { target, now: () => nowMs, endNow: (signal) => ended.push(signal) });
  target.emit('SIGINT');
  assert.equal(stops, 1);
  nowMs += SAME_CTRL_C_MS - 1;
  target.emit('SIGINT');
  target.emit('SIGTERM');
  assert.deepEqual([stops, ended], [1, []], 'npm\'s copy of the same Ctrl-C');
  nowMs += 1;
  target.emit('SIGTERM');
  assert.deepEqual([stops, ended], [1, ['SIGTERM']], 'a second one, later');
  assert.deepEqual([target.listenerCount('SIGINT'), target.listenerCount('SIGTERM')], [0, 0], 'the signal then does what it would have');
});

test('`npm run sluice -- watch` Ctrl-C\'d as a terminal does (npm signals it again) prints where to resume from, each time', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const org = 'acct-ctrl-c';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'e', steps: [{ type: 'delay', duration_ms: 3_600_000 }] } })).status, 201);
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'e', payload: {} } })).status, 202);
    for (let round = 0; round < 3; round++) {
      const child = spawn('npm', ['run', '-s', 'sluice', '--', 'watch', rt.url, '--org', org, '--after-seq', '0'], { cwd: ROOT, env: { ...process.env, SLUICE_API_KEY: key }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      const exited = new Promise<number | string | null>((done) => child.once('exit', (code, signal) => done(code ?? signal)));
      const lines: string[] = [];
      for await (const line of createInterface({ input: child.stdout })) {
        lines.push(line);
        // The run's two updates (queued, running): then Ctrl-C, to npm and the watch alike.
        if (lines.length === 2) process.kill(-child.pid!, 'SIGINT');
      }
      assert.equal(await exited, 0, lines.join('\n'));
      assert.deepEqual(JSON.parse(lines.at(-1) ?? '{}'), { stopped: true, after_seq: 2 }, `round ${round}: ${lines.join('\n')}`);
    }
  } finally {
    await rt.close();
  }
});
