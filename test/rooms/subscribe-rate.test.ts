// Subscribe frames are few per socket: each may start a replay that reads the retained log on the
// event loop, so a socket may send SUBSCRIBE_BURST at once, then SUBSCRIBE_PER_SECOND, and is
// closed with 1008 past that; time is the injected clock's.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { CLOSE_POLICY_VIOLATION } from '../../runtime/rooms/live-close-codes.ts';
import { SUBSCRIBE_BURST, SUBSCRIBE_PER_SECOND } from '../../runtime/rooms/live-rooms.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-subscribe-rate';
const clock = new ManualClock(Date.UTC(2026, 11, 1));
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

/** Heartbeats that close a Subscribe carry its count: the number of Subscribe frames applied. */
const applied = (messages: ReadonlyArray<Record<string, unknown>>): number =>
  Math.max(0, ...messages.flatMap((m) => ('heartbeat' in m ? [Number((m['heartbeat'] as { subscribe_frames?: number }).subscribe_frames ?? 0)] : [])));

test('a burst of Subscribe frames is applied up to the allowance; one more closes the socket with 1008', async () => {
  const client = await connectLive(rt.url, ORG, { token: key });
  for (let i = 0; i < SUBSCRIBE_BURST; i++) client.subscribe({ after_seq: 0 });
  await client.waitFor(() => applied(client.messages) === SUBSCRIBE_BURST, 'every frame of the burst applied');
  client.subscribe({ after_seq: 0 });
  const closed = await Promise.race([client.closed, new Promise<{ code: number; reason: string }>((resolve) => setTimeout(() => resolve({ code: 0, reason: 'still open after 5 s' }), 5000).unref())]);
  assert.equal(closed.code, CLOSE_POLICY_VIOLATION, closed.reason);
  assert.match(closed.reason, /^subscribe_rate_exceeded/);
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}`, { token: key })).status, 200, 'the server goes on');
});

test('the allowance refills with time: a client that subscribes at the allowed rate is never closed', async () => {
  const client = await connectLive(rt.url, ORG, { token: key });
  const frames = SUBSCRIBE_BURST + 3 * SUBSCRIBE_PER_SECOND;
  for (let i = 0; i < frames; i++) {
    client.subscribe({ after_seq: 0 });
    await client.waitFor(() => applied(client.messages) === i + 1, `frame ${i + 1} applied`);
    clock.advance(1000 / SUBSCRIBE_PER_SECOND);
  }
  client.close();
  assert.equal((await client.closed).code, 1005, 'closed by the client, not the server');
});
