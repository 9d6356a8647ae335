// A delivery to a source whose delete is being written stores nothing (the source reads as gone, so
// no claim lands behind the delete) and is answered `503 source_deletion_pending` with a Retry-After:
// should the delete's write fail, the source stays and the delivery sent again is taken; once it
// went through, it is a 404. (It was a 404 in that window, as if the source were gone, even when
// the delete then failed and the source stayed.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-source-pending';
const BODY = JSON.stringify({ type: 'orders.created', order: 9 });

test('a delivery while the source\'s delete is written is answered 503 to send again: taken when the delete failed, 404 once it went through', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const secret = newStandardSecret();
    for (const name of ['shop', 'store']) {
      const made = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name, secrets: [secret] } });
      assert.equal(made.status, 201, made.text);
    }
    const deliver = (source: string) => call(rt.url, 'POST', `/hooks/${ORG}/${source}`, { body: BODY, headers: signStandard(secret, `msg-${source}`, Math.floor(Date.now() / 1000), BODY) });

    for (const [source, fails] of [['shop', true], ['store', false]] as const) {
      const write = gateNextCall(rt.runtime.ledger.root, 'transaction', fails ? new Error('MDB_DISKFULL: simulated') : undefined);
      try {
        const deleting = call(rt.url, 'DELETE', `/organizations/${ORG}/sources/${source}`, { token: key });
        await write.reachedBefore(deleting, 'the delete');
        const pending = await deliver(source);
        assert.deepEqual([pending.status, pending.body.error.code, pending.headers.get('retry-after')], [503, 'source_deletion_pending', '1'], pending.text);
        write.release();
        const deleted = await deleting;
        assert.equal(deleted.status, fails ? 500 : 204, deleted.text);
      } finally {
        write.done();
      }
      const again = await deliver(source);
      assert.equal(again.status, fails ? 204 : 404, `${source}: ${again.text}`);
    }
  } finally {
    await rt.close();
  }
});
