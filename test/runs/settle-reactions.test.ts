// The reactions of one write that stores several events (a start ending device connections left
// open, say) are each settled whatever another one throws: a run left unsettled had every command
// (a cancel, its admission, its step's answer) wait for good, and a clean stop with them (found by a
// review). The throw is injected: the live rooms' publish fails once, in the first run's start.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rootEvent } from '../../runtime/events/event-record.ts';
import { runIdFor } from '../../runtime/runs/run-store.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-settle-each';

test('a reaction that throws as its write settles leaves the others of the write settled: their runs take commands', { timeout: 20_000 }, async () => {
  const rt = await startRuntime({ args: ['--runner', 'off'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'wait', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 60_000 }] } });
    assert.equal(made.status, 201, made.text);
    const workflowId = made.body.workflow.id as string;
    const { context, engine } = rt.runtime;
    const now = Date.now();
    const events = ['evt-first', 'evt-second'].map((id) => rootEvent({ id, org_id: ORG, type: 'go', payload: {}, environment: 'production', source: '@api', provider_event_id: null, received_at_ms: now } as never));
    const rooms = rt.runtime.rooms as unknown as { publish: (...args: unknown[]) => unknown };
    const publish = rooms.publish.bind(rooms);
    let failed = false;
    rooms.publish = (...args: unknown[]) => {
      if (failed) return publish(...args);
      failed = true;
      throw new Error('injected publish failure');
    };
    await assert.rejects(
      context.events.writeWithEvents((write) => {
        for (const event of events) write(event);
        return true;
      }),
      /injected publish failure/,
    );
    for (const event of events) {
      const runId = runIdFor(ORG as never, event.id as never, workflowId as never);
      assert.equal(await engine.command(ORG, runId, { type: 'run.cancel', reason: 'test' }), true, `${event.id}: cancelled`);
    }
  } finally {
    await rt.close();
  }
});
