// A run can be read (and so cancelled through the API) once the write that creates it commits,
// before its flush ends. A cancel that comes then waits for the run's start and applies to the
// actor it starts with: the run stays cancelled and its next step is never sent. (Found by a race
// probe: the cancel answered 200 `cancelled`, then the actor the run started with sent both steps
// and wrote `completed` over it.)

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';
import { holdNextEventFlush } from '../helpers/unflushed-event.ts';
import { queuedWritesRun } from '../helpers/held-deletion.ts';

const ORG = 'acct-cancel-created';

test('a cancel sent while the run\'s creating write is being flushed applies once the run starts: nothing more is sent', async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  let answerFirst: () => void = () => undefined;
  // A first run's two requests answered at once, then the raced run's first held.
  const receiver = await startReceiver([{ status: 200 }, { status: 200 }, { status: 200, after: new Promise<void>((resolve) => (answerFirst = resolve)) }, { status: 200 }]);
  let flush: ReturnType<typeof holdNextEventFlush> | undefined;
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const steps = ['a', 'b'].map((id) => ({ id, type: 'webhook', url: `${receiver.url}/${id}` }));
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'two', trigger_event: 'go', steps } });
    assert.equal(made.status, 201, made.text);
    // Its connection kept alive: the raced run's first request goes out at once, with no connect to withdraw it in.
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { id: 'warm', type: 'go', payload: {} } })).status, 202);
    await eventually('the first run done', () => receiver.received.length, (count) => count === 2);

    flush = holdNextEventFlush(rt.runtime.ledger, ORG);
    const sending = call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { id: 'race', type: 'go', payload: {} } });
    await flush.committed;
    const reactions = await eventually('the run readable', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/race`, { token: key })).body?.reactions as Array<{ run_id: string }> | undefined, (found) => found?.length === 1);
    const runPath = `/organizations/${ORG}/runs/${reactions![0]!.run_id}`;
    // Known to have reached the engine before the flush is let go.
    const { engine } = rt.runtime;
    const command = engine.command.bind(engine);
    let arrived: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    engine.command = (...args) => {
      arrived();
      return command(...args);
    };
    const cancelling = call(rt.url, 'POST', `${runPath}/cancel`, { token: key });
    await reached;
    // Whatever the cancel would write is written before the flush ends (it waits for the run's start instead).
    await new Promise((resolve) => setImmediate(resolve));
    await queuedWritesRun(rt.runtime.ledger.root);
    flush.release();
    assert.equal((await sending).status, 202);
    const cancelled = await cancelling;
    assert.deepEqual([cancelled.status, cancelled.body.run.state], [200, 'cancelled'], cancelled.text);

    // Step a went out, or was withdrawn before it could: either way its fate is recorded after the cancel.
    answerFirst();
    const view = await eventually('step a\'s fate after the cancel', async () => (await call(rt.url, 'GET', runPath, { token: key })).body.run, (run) => (run.steps[0].attempts[0]?.after_cancel ?? null) !== null);
    assert.equal(view.state, 'cancelled');
    assert.deepEqual(receiver.received.slice(2).map((request) => request.path).filter((path) => path !== '/a'), [], 'step b is never sent');
  } finally {
    flush?.restore();
    answerFirst();
    await rt.close();
    await receiver.close();
  }
});
