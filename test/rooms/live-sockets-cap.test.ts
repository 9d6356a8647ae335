// An org holds at most --live-sockets-per-org live sockets open at once: one more upgrade is a 429
// naming the cap, other orgs are not counted against it, and a closed socket frees its place.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

test('past the org\'s cap an upgrade is refused with 429; another org and a freed place are admitted', async () => {
  const rt = await startRuntime({ args: ['--live-sockets-per-org', '2'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-capped-live');
    const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-other-live');
    const first = await connectLive(rt.url, 'acct-capped-live', { token: key });
    const second = await connectLive(rt.url, 'acct-capped-live', { token: key });
    await assert.rejects(connectLive(rt.url, 'acct-capped-live', { token: key }), /upgrade refused: 429/);
    const other = await connectLive(rt.url, 'acct-other-live', { token: otherKey });
    first.close();
    await first.closed;
    let third;
    for (let tries = 0; third === undefined; tries++) {
      // The server counts the close when it sees it, a moment after the client's.
      third = await connectLive(rt.url, 'acct-capped-live', { token: key }).catch((error: Error) => (tries < 50 ? undefined : Promise.reject(error)));
      if (third === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const client of [second, other, third]) client.close();
  } finally {
    await rt.close();
  }
});
