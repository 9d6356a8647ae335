// What `sluice dev` shows of its hook-runner child at the default log level, with the real runtime
// and a real runner process: the key-rotation result and warnings reach the operator; the
// supervisor's routine state changes stay at debug.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { createRuntime } from '../../runtime/create-runtime.ts';
import { createLogger } from '../../runtime/log.ts';
import { tempDir } from '../helpers/runtime.ts';

interface LogLine {
  readonly level: string;
  readonly line?: string;
}

test("the runner child's rotation line and warnings are logged at warn, its routine lines are not at info", async () => {
  const dataDir = tempDir();
  // The child inherits this process's environment, as under `npm start`.
  process.env['SLUICE_PREVIOUS_MASTER_KEYS'] = randomBytes(32).toString('hex');
  const written: LogLine[] = [];
  const config = loadRuntimeConfig(['--port', '0', '--data-dir', dataDir, '--runner', 'child', '--admin-token', 'a'.repeat(32)], {});
  const runtime = await createRuntime(config, { logger: createLogger('info', (text) => void written.push(JSON.parse(text) as LogLine)) });
  try {
    const runnerLines = written.filter((entry) => entry.line !== undefined);
    assert.ok(
      runnerLines.some((entry) => entry.level === 'warn' && /master key rotation: 0 secret\(s\) sealed again/.test(entry.line ?? '')),
      JSON.stringify(written),
    );
    assert.equal(runnerLines.some((entry) => /-> running/.test(entry.line ?? '')), false, 'state changes stay at debug');
  } finally {
    delete process.env['SLUICE_PREVIOUS_MASTER_KEYS'];
    await runtime.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
