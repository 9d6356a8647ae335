// A runtime on a manual clock with one org, for the schedule tests that step the wall clock: the
// ticks sent of an event type, and the ticker's look at a given time (its re-check does one at
// least every minute).

import assert from 'node:assert/strict';
import { ManualClock } from '../../runtime/clock.ts';
import type { Runtime } from '../../runtime/create-runtime.ts';
import { call, createOrg } from './http.ts';
import { ADMIN_TOKEN, startRuntime } from './runtime.ts';

export interface ClockedSchedules {
  readonly url: string;
  readonly runtime: Runtime;
  /** The org's admin key. */
  readonly key: string;
  /** The `scheduled_for` of every tick event of `type` stored, sorted. */
  ticksOf(type: string): Promise<string[]>;
  /** Moves the clock to `at` and lets the ticker look; answers how many timers fired. */
  lookAt(at: number): number;
  close(): Promise<void>;
}

export async function startClockedSchedules(org: string, start: number): Promise<ClockedSchedules> {
  const clock = new ManualClock(start);
  const rt = await startRuntime({ clock });
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  return {
    url: rt.url,
    runtime: rt.runtime,
    key,
    ticksOf: async (type) => {
      const listed = await call(rt.url, 'GET', `/organizations/${org}/events?type=${type}`, { token: key });
      assert.equal(listed.status, 200, listed.text);
      return listed.body.events.map((e: { payload: { scheduled_for: string } }) => e.payload.scheduled_for).sort();
    },
    lookAt: (at) => {
      clock.set(at);
      return rt.runtime.ticker.timers.fireDue();
    },
    close: () => rt.close(),
  };
}
