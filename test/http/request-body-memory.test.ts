// How much request body the runtime holds in memory at once follows --request-bodies-mib (default:
// a quarter of Node's heap limit, which Node sizes to a container's memory, from 72 to 256 MiB): at
// 72 MiB one org's bodies may hold 9 MiB, so a second large webhook while one is still arriving is
// 503 server_busy, not a process pushed past its memory limit. Real uWS, LMDB and sockets.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { UPLOAD_BODY_LIMIT } from '../../runtime/actions/multipart-upload.ts';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { MIN_BODY_BUDGET_BYTES } from '../../runtime/http/body-budget.ts';
import { MAX_BODY_LIMIT_BYTES } from '../../runtime/sources/source-record.ts';
import { call, createOrg, newStandardSecret } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const MIB = 1024 * 1024;

/** The default as a Node process with this old-space limit works it out. */
function defaultUnderHeap(oldSpaceMib: number): number {
  const script = "import { loadRuntimeConfig } from './runtime/config.ts'; process.stdout.write(String(loadRuntimeConfig([], {}).requestBodyBytes));";
  const child = spawnSync(process.execPath, [`--max-old-space-size=${oldSpaceMib}`, '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  return Number(child.stdout);
}

test('the default follows the heap limit, from 72 to 256 MiB; a flag or the environment sets it, never below what an org needs for the largest body', () => {
  assert.equal(defaultUnderHeap(200), 72 * MIB, 'a small container: the floor');
  const middle = defaultUnderHeap(400);
  assert.ok(middle > 100 * MIB && middle < 125 * MIB, `a quarter of the heap limit (old space and young): ${middle / MIB} MiB`);
  assert.equal(defaultUnderHeap(4096), 256 * MIB, 'room to spare: the cap');
  assert.equal(loadRuntimeConfig(['--request-bodies-mib', '72'], {}).requestBodyBytes, 72 * MIB);
  assert.equal(loadRuntimeConfig([], { SLUICE_REQUEST_BODIES_MIB: '1024' }).requestBodyBytes, 1024 * MIB);
  assert.throws(() => loadRuntimeConfig(['--request-bodies-mib', '71'], {}), /--request-bodies-mib must be an integer from 72 to 65536; got "71"/);
  // An org's eighth of the least budget takes the largest body any route accepts.
  assert.ok(MIN_BODY_BUDGET_BYTES / 8 >= Math.max(UPLOAD_BODY_LIMIT, MAX_BODY_LIMIT_BYTES));
});

test('at --request-bodies-mib 72 a second 6 MB webhook of an org whose first is still arriving is 503 server_busy; another org is served', async () => {
  const rt = await startRuntime({ args: ['--request-bodies-mib', '72'] });
  let held: Socket | undefined;
  try {
    const orgs = ['acct-bodies-a', 'acct-bodies-b'];
    for (const org of orgs) {
      const key = await createOrg(rt.url, ADMIN_TOKEN, org);
      const source = await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: key, json: { name: 'big', secrets: [newStandardSecret()], body_limit_bytes: 8 * MIB } });
      assert.equal(source.status, 201, source.text);
    }
    const size = 6_000_000;
    // The first: all but its last byte sent, so its 6 MB stay held while it arrives.
    held = connect(Number(new URL(rt.url).port), '127.0.0.1');
    await new Promise<void>((resolve) => held!.once('connect', resolve));
    held.write(`POST /hooks/${orgs[0]}/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`);
    held.write(Buffer.alloc(size - 1, 0x20));
    const body = JSON.stringify({ type: 'large.created', id: 'second', pad: 'x'.repeat(size - 50) });
    const headers = { 'content-type': 'application/json', 'webhook-id': 'second', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,bm90IGEgc2lnbmF0dXJl' };
    const refused = await eventually('the first body held', async () => call(rt.url, 'POST', `/hooks/${orgs[0]}/big`, { body, headers }), (answer) => answer.status === 503);
    assert.equal(refused.body.error.code, 'server_busy', refused.text);
    // Another org's share is its own: its body is read (and then judged: this signature is no one's).
    const other = await call(rt.url, 'POST', `/hooks/${orgs[1]}/big`, { body, headers });
    assert.equal(other.status, 401, other.text);
  } finally {
    held?.destroy();
    await rt.close();
  }
});
