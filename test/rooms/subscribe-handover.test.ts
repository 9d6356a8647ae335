// A Subscribe on a socket that is on its room's topic, arriving in the same event-loop turn as a
// fan-out: uWS holds topic messages per subscriber until the end of the turn, so the socket must be
// sent them before it leaves the topic, and its replay must not send them again.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import uws, { type TemplatedApp, type WebSocketBehavior } from 'uWebSockets.js';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import type { NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

/**
 * Runs before the live rooms handle the next client frame, in the same uWS callback: the only way
 * to put a fan-out and a Subscribe in one loop turn on purpose. The app is the real uWS app; only
 * its `ws` registration is wrapped.
 */
let beforeNextFrame: (() => void) | undefined;
const createApp = uws.App;
(uws as { App: typeof uws.App }).App = (...options) => {
  const app: TemplatedApp = createApp(...options);
  const register = app.ws.bind(app);
  app.ws = (pattern: string, behavior: WebSocketBehavior<unknown>) =>
    register(pattern, {
      ...behavior,
      message: (ws, message, isBinary) => {
        const hook = beforeNextFrame;
        beforeNextFrame = undefined;
        hook?.();
        behavior.message?.(ws, message, isBinary);
      },
    });
  return app;
};

const ORG = 'acct-handover';
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => rt.close());

const update = (runId: string): NewRunUpdate => ({
  run_id: runId, state: 'completed', channel: 'c', workflow_id: 'wf', event_id: 'evt', step_id: 's', attempt: 1, at_ms: 1, error: '', environment: 'production',
});

const durableUpdates = (runIds: string[]): Promise<RunUpdate[]> => {
  const { ledger, updateLog } = rt.runtime;
  return durably(ledger.root, ledger.root.transaction(() => runIds.map((runId) => updateLog.append(ORG, update(runId)))));
};

test('updates fanned out in the turn a Subscribe arrives reach the socket once: not dropped with the topic, not replayed again', async () => {
  const { rooms } = rt.runtime;
  const client = await connectLive(rt.url, ORG, { token: key });
  const [first] = await durableUpdates(['run-before']);
  rooms.publish(ORG, [first!]);
  await client.waitFor(() => client.updates().length === 1, 'the live socket to get the first update');

  const sameTurn = await durableUpdates(['run-a', 'run-b', 'run-c']);
  beforeNextFrame = () => rooms.publish(ORG, sameTurn);
  client.subscribe({ after_seq: 0 });
  await client.waitFor(() => beforeNextFrame === undefined && rooms.replayingCount === 0, 'the Subscribe to be handled and its replay to end');
  const [later] = await durableUpdates(['run-after']);
  rooms.publish(ORG, [later!]);
  await client.waitFor(() => client.updates().some((u) => u.seq === later!.seq), 'the update after the Subscribe');

  const seqs = client.updates().map((u) => u.seq);
  const published = [first!, ...sameTurn, later!].map((u) => u.seq);
  for (const seq of published) assert.equal(seqs.filter((s) => s === seq).length, 1, `seq ${seq} arrived once (got ${seqs.join(',')})`);
  assert.equal(seqs.length, published.length, `nothing else arrived (got ${seqs.join(',')})`);
  client.close();
});
