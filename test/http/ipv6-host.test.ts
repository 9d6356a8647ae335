// The runtime's URL (printed at start, used in the welcome's curl lines) brackets an IPv6 host.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startRuntime } from '../helpers/runtime.ts';

test('listening on an IPv6 literal gives a URL with the address in brackets, and it answers', async () => {
  const rt = await startRuntime({ args: ['--host', '::1'] });
  try {
    assert.match(rt.url, /^http:\/\/\[::1\]:\d+$/);
    const health = await fetch(`${rt.url}/healthz`);
    assert.equal(health.status, 200);
  } finally {
    await rt.close();
  }
});
