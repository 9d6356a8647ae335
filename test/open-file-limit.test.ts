// A runtime started under a low open-file limit (256): the WebSocket and webhook socket totals are
// cut from what the descriptors it always holds leave (they came to more than the limit, and
// webhook steps failed `sluice_out_of_file_descriptors` within their total), and the start warns,
// saying how to raise it.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { defaultWebSocketLimit } from '../runtime/http/websocket-budget.ts';
import { defaultOutboundSocketTotal } from '../runtime/runs/org-socket-share.ts';
import { call } from './helpers/http.ts';
import { eventually } from './helpers/receiver.ts';
import { spawnRuntime, tempDir } from './helpers/runtime.ts';

const LIMIT = 256;

test('under a limit of 256 the totals fit in it with room to spare, and the start says the limit is low', async () => {
  const dataDir = tempDir();
  const runtime = await spawnRuntime(dataDir, 'serve', ['--runner', 'off'], 'fixed', [], ['bash', '-c', `ulimit -n ${LIMIT} && exec "$@"`, 'bash']);
  try {
    const metrics = (await call(runtime.url, 'GET', '/metrics')).text;
    const webhookSockets = Number(/^sluice_webhook_connections_limit (\d+)$/m.exec(metrics)?.[1]);
    assert.equal(webhookSockets, defaultOutboundSocketTotal(LIMIT));
    assert.ok(webhookSockets + defaultWebSocketLimit(LIMIT) <= LIMIT - 64, `${webhookSockets} + ${defaultWebSocketLimit(LIMIT)} leave 64 of ${LIMIT}`);
    // Logged before the port is printed, but on stderr, which may come in after stdout's line.
    const warning = (await eventually('the warning', async () => runtime.output.find((line) => line.includes('the open-file limit is 256')), (line) => line !== undefined))!;
    assert.match(warning, /ulimit -n/);
    assert.match(warning, new RegExp(`"websockets":${defaultWebSocketLimit(LIMIT)}`));
  } finally {
    runtime.child.kill('SIGTERM');
    await runtime.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
});
