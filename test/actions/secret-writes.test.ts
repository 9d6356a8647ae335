// The secret writes in flight (secret-writes.ts): one secret's writes run one after another, other
// secrets' at once; an org's `settled` waits for every write of that org queued or running (what an
// org's deletion waits for before it lists the hook-runner's secrets), and for no other org's.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SecretWrites } from '../../runtime/actions/secret-writes.ts';

/** A write that runs until `finish` is called, recording when it started. */
function heldWrite(log: string[], name: string) {
  let finish = (): void => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return { finish, write: async () => { log.push(`${name} started`); await done; log.push(`${name} done`); return name; } };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('writes of one secret queue; settled waits for the org\'s writes only', async () => {
  const writes = new SecretWrites();
  const log: string[] = [];
  const first = heldWrite(log, 'a1');
  const second = heldWrite(log, 'a2');
  const other = heldWrite(log, 'b');
  const a1 = writes.run('org-a', 'act', 'KEY', first.write);
  const a2 = writes.run('org-a', 'act', 'KEY', second.write);
  const b = writes.run('org-b', 'act', 'KEY', other.write);
  let aSettled = false;
  const settledA = writes.settled('org-a').then(() => (aSettled = true));
  await turn();
  assert.deepEqual(log, ['a1 started', 'b started'], 'the same secret waits; another org\'s does not');

  other.finish();
  assert.equal(await b, 'b');
  await writes.settled('org-b');
  assert.equal(aSettled, false);

  first.finish();
  assert.equal(await a1, 'a1');
  await turn();
  assert.equal(aSettled, false, 'the queued write of the org still counts');
  assert.deepEqual(log.slice(-1), ['a2 started']);
  second.finish();
  assert.equal(await a2, 'a2');
  await settledA;
  assert.equal(aSettled, true);
  await writes.settled('org-never');
});

test('a write that fails settles its org too, and its error goes to its caller', async () => {
  const writes = new SecretWrites();
  await assert.rejects(writes.run('org-a', 'act', 'KEY', async () => { throw new Error('runner down'); }), /runner down/);
  await writes.settled('org-a');
});
