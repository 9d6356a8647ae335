// A runtime started after its history passed retention prunes it at start, not only an hour
// later: one restarted more often than hourly (deploys, a crash loop) would otherwise never prune.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DAY_MS } from '../../runtime/events/history-retention.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

const ORG = 'acct-prune-at-start';

test('events past retention are pruned right after a start', async () => {
  const clock = new ManualClock(Date.UTC(2026, 9, 1, 12, 0, 0));
  const dataDir = tempDir();
  try {
    let rt = await startRuntime({ clock, dataDir });
    let key: string;
    try {
      key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
      for (const id of ['old-1', 'old-2', 'old-3']) {
        assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'x.old', payload: {}, id } })).status, 202);
      }
    } finally {
      await rt.close();
    }
    clock.advance(45 * DAY_MS);
    rt = await startRuntime({ clock, dataDir });
    try {
      const listed = () => call(rt.url, 'GET', `/organizations/${ORG}/events`, { token: key }).then((answer) => answer.body.events as unknown[]);
      await eventually('the start-up prune', listed, (events) => events.length === 0);
    } finally {
      await rt.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
