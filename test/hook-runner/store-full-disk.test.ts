// The hook-runner's store on a full disk (the file held to 8 MiB by a file-size limit, SIGXFSZ
// ignored): after a commit fails, waiting for the flush still ends. lmdb-js never settles the failed
// batch's flush promise; re-uploading a module the runner already had waited on it (a compile that
// never answered) until some other write came along.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { underFileSizeLimit } from '../helpers/file-size-limit.ts';
import { ROOT, tempDir } from '../helpers/runtime.ts';

const script = `
import { guardCommitFailures } from ${JSON.stringify(`${ROOT}/hook-runner/lmdb-commit-failure.ts`)};
import { openRunnerStore } from ${JSON.stringify(`${ROOT}/hook-runner/store.ts`)};
guardCommitFailures(() => undefined);
const store = openRunnerStore(process.argv[1]);
let stored = 0;
let failed = false;
for (let i = 0; i < 1000 && !failed; i++) {
  try {
    await store.durable(store.modules.put('module-' + i, Buffer.alloc(200_000, i)));
    stored++;
  } catch {
    failed = true;
  }
}
const wait = await Promise.race([store.flushed().then(() => 'flushed', () => 'refused'), new Promise((resolve) => setTimeout(() => resolve('hung'), 5000))]);
console.log(JSON.stringify({ stored, failed, wait }));
// Not store.close(): lmdb-js's own close does not end on an environment whose commit failed.
process.exit(0);
`;

test('after a failed commit, a wait for the store\'s flush ends instead of hanging on the failed batch', { timeout: 60_000 }, async () => {
  const dataDir = tempDir('sluice-runner-full-');
  try {
    const { stdout } = await promisify(execFile)('bash', underFileSizeLimit(8192, [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script, dataDir]), { cwd: ROOT });
    const outcome = JSON.parse(stdout.trim().split('\n').at(-1)!) as { stored: number; failed: boolean; wait: string };
    assert.ok(outcome.failed && outcome.stored > 5, `the disk filled after ${outcome.stored} modules`);
    assert.notEqual(outcome.wait, 'hung');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
