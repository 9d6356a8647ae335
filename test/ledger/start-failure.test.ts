// A runtime that fails to start part way (here: its port is taken) closes what it had opened: the
// ledger and its data dir lock, and the hook-runner child it had started. An in-process caller can
// then start again on the same data dir, and no runner process is left behind.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { startRuntime, tempDir } from '../helpers/runtime.ts';

function listenAnywhere(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port })));
}

/** Pids of live processes whose command line mentions `text` (Linux /proc). */
function processesMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

test('a start that fails at listen releases the data dir lock and stops its hook-runner child', async () => {
  const { server, port } = await listenAnywhere();
  const dataDir = tempDir();
  try {
    await assert.rejects(startRuntime({ dataDir, args: ['--port', String(port), '--runner', 'child'] }), /could not listen/);
    assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false, 'the data dir lock was released');
    assert.deepEqual(processesMentioning(dataDir), [], 'no hook-runner child is left running');
  } finally {
    server.close();
  }
  const again = await startRuntime({ dataDir, args: ['--runner', 'child'] });
  assert.ok(again.runtime.runner.child !== undefined);
  await again.close();
});
