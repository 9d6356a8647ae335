// The bench's command-line options: a relative --data-root is made absolute, so that the check of
// its filesystem (tmpfs makes durability numbers meaningless) matches its mount point, not `/`.

import assert from 'node:assert/strict';
import { isAbsolute, resolve } from 'node:path';
import { test } from 'node:test';
import { parseCliOptions } from '../../bench/cli-options.ts';

test('a relative --data-root is resolved against the working directory before anything reads it', () => {
  const options = parseCliOptions(['ingest', '--quick', '--data-root', '../../dev/shm']);
  assert.ok(options.dataRoot !== undefined && isAbsolute(options.dataRoot), String(options.dataRoot));
  assert.equal(options.dataRoot, resolve('../../dev/shm'));
});
