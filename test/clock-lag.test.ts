// A wall clock behind at the start and stepped forward later (a host without a real-time clock,
// before its NTP sync) dated claims and history behind; the process that saw the step kept them,
// but the next start measured their ages on the wall clock: a webhook delivery sent again within
// the dedup window was taken as new (a second event and runs), and history was pruned early (a
// probe with libfaketime, 2026-12-08). The lag is now recorded (clock-lag.ts) and later starts
// measure ages that much behind, until the longest of the window and the retention has passed.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { ClockLag, LAG_NOTICED_MS } from '../runtime/clock-lag.ts';
import { pruneTime } from '../runtime/prune-time.ts';
import { call, createOrg, newStandardSecret, signStandard } from './helpers/http.ts';
import { LEDGER_KINDS } from './helpers/ledgers.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from './helpers/runtime.ts';
import { SettableClock } from './helpers/settable-clock.ts';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

const REAL = Date.UTC(2026, 11, 8, 12, 0, 0);

for (const kind of LEDGER_KINDS) {
  describe(`clock lag on ${kind.name}`, () => {
    test('a step forward seen by one start is carried by the next, until the keep time has passed since it was recorded', async () => {
      const { ledger, close } = kind.open();
      try {
        const behind = new SettableClock(REAL - 40 * MINUTE);
        const first = new ClockLag(ledger, behind, DAY);
        assert.equal(first.carriedAt(REAL), 0, 'nothing recorded yet');
        behind.advance(5 * MINUTE);
        await first.check();
        behind.wall += 40 * MINUTE; // the NTP step
        behind.advance(MINUTE);
        await first.check();
        assert.equal(first.carriedAt(REAL), 0, 'the start that saw the step measures on its own elapsed time, not behind it');
        await first.close();

        const next = new ClockLag(ledger, new SettableClock(REAL + 7 * MINUTE), DAY);
        const recordedAt = REAL + 6 * MINUTE;
        assert.equal(next.carriedAt(recordedAt), 40 * MINUTE);
        assert.equal(next.carriedAt(recordedAt + DAY - 1), 40 * MINUTE);
        assert.equal(next.carriedAt(recordedAt + DAY), 0, 'past the keep time, everything dated behind has aged out anyway');
      } finally {
        await close();
      }
    });

    test('a lag under LAG_NOTICED_MS is not written; one that grows is; a smaller one later keeps the carried one', async () => {
      const { ledger, close } = kind.open();
      try {
        const clock = new SettableClock(REAL);
        const first = new ClockLag(ledger, clock, DAY);
        clock.wall += LAG_NOTICED_MS - 1;
        await first.check();
        assert.equal(new ClockLag(ledger, clock, DAY).carriedAt(clock.wall), 0, 'jitter is not a lag');
        clock.wall += 10 * MINUTE;
        await first.check();
        assert.equal(new ClockLag(ledger, clock, DAY).carriedAt(clock.wall), 10 * MINUTE + LAG_NOTICED_MS - 1);
        await first.close();

        const second = new ClockLag(ledger, clock, DAY);
        clock.wall += 2 * MINUTE; // this start's own lag is smaller than the one carried
        await second.close();
        assert.equal(new ClockLag(ledger, clock, DAY).carriedAt(clock.wall), 10 * MINUTE + LAG_NOTICED_MS - 1);
      } finally {
        await close();
      }
    });

    test('a later start records its own smaller step, whether the earlier lag has expired or is still kept (then the larger covers both from the later step)', async () => {
      const { ledger, close } = kind.open();
      try {
        const first = new SettableClock(REAL - 60 * MINUTE);
        const one = new ClockLag(ledger, first, DAY);
        first.wall += 60 * MINUTE;
        await one.close();
        // Two days on (the first lag's keep time is over), a start 20 minutes behind, then put right.
        const second = new SettableClock(REAL + 2 * DAY - 20 * MINUTE);
        const two = new ClockLag(ledger, second, DAY);
        assert.equal(two.carriedAt(second.wall), 0, 'the first lag has expired');
        second.wall += 20 * MINUTE;
        await two.close();
        assert.equal(new ClockLag(ledger, new SettableClock(REAL + 2 * DAY + MINUTE), DAY).carriedAt(REAL + 2 * DAY + MINUTE), 20 * MINUTE);

        // Within the keep time of a larger lag: the larger is carried on for the keep time from the smaller step.
        const third = new SettableClock(REAL + 2 * DAY + 12 * 60 * MINUTE - 5 * MINUTE);
        const three = new ClockLag(ledger, third, DAY);
        third.wall += 5 * MINUTE;
        await three.close();
        const stepAt = REAL + 2 * DAY + 12 * 60 * MINUTE;
        const later = new ClockLag(ledger, new SettableClock(stepAt + MINUTE), DAY);
        assert.equal(later.carriedAt(stepAt + DAY - 1), 20 * MINUTE, 'kept a day from the later step, not from the first');
        assert.equal(later.carriedAt(stepAt + DAY), 0);
      } finally {
        await close();
      }
    });

    test('a lag is not lowered while a start runs: a clock corrected, then set back wrongly, keeps what was dated behind protected', async () => {
      const { ledger, close } = kind.open();
      try {
        const clock = new SettableClock(REAL - 60 * MINUTE);
        const lag = new ClockLag(ledger, clock, DAY);
        clock.wall += 60 * MINUTE; // the NTP step
        await lag.check();
        clock.wall -= 60 * MINUTE; // set back by mistake
        clock.advance(LAG_NOTICED_MS);
        await lag.close();
        assert.equal(new ClockLag(ledger, new SettableClock(REAL + MINUTE), DAY).carriedAt(REAL + MINUTE), 60 * MINUTE);
      } finally {
        await close();
      }
    });

    test('a lag recorded while the clock was wrongly ahead is taken, and written back, as made at the next start: kept one keep time from there, not until its date', async () => {
      const { ledger, close } = kind.open();
      try {
        const ahead = new SettableClock(REAL);
        const crashed = new ClockLag(ledger, ahead, DAY);
        ahead.wall += 365 * DAY;
        await crashed.check(); // and the process stops with the clock still ahead
        const nextClock = new SettableClock(REAL + MINUTE);
        const next = new ClockLag(ledger, nextClock, DAY);
        assert.equal(next.carriedAt(REAL + MINUTE), 365 * DAY, 'kept: it cannot be told from a clock that was behind');
        assert.equal(next.carriedAt(REAL + MINUTE + DAY), 0, 'but only the keep time from this start');
        await next.close();
        const dayLater = REAL + MINUTE + DAY;
        assert.equal(new ClockLag(ledger, new SettableClock(dayLater), DAY).carriedAt(dayLater), 0, 'a start after that carries nothing: the record was written back as of the start that read it');
      } finally {
        await close();
      }
    });

    test('a start itself behind carries the earlier lag on when it is put right: the larger covers both', async () => {
      const { ledger, close } = kind.open();
      try {
        const a = new SettableClock(REAL - 3 * DAY);
        const first = new ClockLag(ledger, a, DAY);
        a.wall += 3 * DAY;
        await first.close();
        const b = new SettableClock(REAL + 60 * MINUTE - 2 * DAY);
        const second = new ClockLag(ledger, b, DAY);
        b.wall += 2 * DAY;
        b.advance(MINUTE);
        await second.close();
        const at = REAL + 62 * MINUTE;
        assert.equal(new ClockLag(ledger, new SettableClock(at), DAY).carriedAt(at), 3 * DAY);
      } finally {
        await close();
      }
    });

    test('prune time is measured behind by the carried lag', async () => {
      const { ledger, close } = kind.open();
      try {
        const clock = new SettableClock(REAL);
        const first = new ClockLag(ledger, clock, DAY);
        clock.wall += 30 * MINUTE;
        await first.close();
        const later = new SettableClock(REAL + 31 * MINUTE);
        const lag = new ClockLag(ledger, later, DAY);
        const now = pruneTime(later, lag);
        assert.equal(now(), REAL + MINUTE);
        later.advance(DAY);
        assert.equal(now(), REAL + 31 * MINUTE + DAY, 'a day after it was recorded, the lag is no longer carried');
      } finally {
        await close();
      }
    });
  });
}

test('a delivery taken while the clock was behind at the start, sent again after a restart once the clock is right, is a 409 (an hour behind, a window of ten minutes)', async () => {
  const dataDir = tempDir();
  const org = 'acct-clock-lag';
  const secret = newStandardSecret();
  const body = JSON.stringify({ type: 'order.paid', id: 'o-1' });
  const windowMs = 601_000; // the least the runtime takes
  const args = ['--dedup-window-ms', String(windowMs)];
  try {
    const behind = new SettableClock(REAL - 60 * MINUTE);
    const first = await startRuntime({ dataDir, clock: behind, args });
    let eventId: string;
    try {
      const key = await createOrg(first.url, ADMIN_TOKEN, org);
      assert.equal((await call(first.url, 'POST', `/organizations/${org}/sources`, { token: key, json: { name: 'shop', secrets: [secret] } })).status, 201);
      const sent = await call(first.url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(secret, 'msg-1', Math.floor(behind.now() / 1000), body) });
      assert.equal(sent.status, 204, sent.text);
      eventId = String(sent.headers.get('sluice-event-id'));
      behind.wall += 60 * MINUTE; // the NTP step, then the process keeps running a while
      behind.advance(MINUTE);
      await first.runtime.clockLag.check();
    } finally {
      await first.close();
    }

    const right = new SettableClock(REAL + 2 * MINUTE);
    const second = await startRuntime({ dataDir, clock: right, args });
    try {
      await second.runtime.prune();
      const key = await createOrgKey(second.url, org);
      const again = await call(second.url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(secret, 'msg-1', Math.floor(right.now() / 1000), body) });
      assert.equal(again.status, 409, `two minutes after it was taken, the same delivery is a duplicate: ${again.text}`);
      const event = await call(second.url, 'GET', `/organizations/${org}/events/${eventId}`, { token: key });
      assert.equal(event.status, 200, 'its event is kept');

      right.advance(windowMs);
      await second.runtime.prune();
      const passed = await call(second.url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(secret, 'msg-1', Math.floor(right.now() / 1000), body) });
      assert.equal(passed.status, 204, `once the window has truly passed since it was taken, the id is taken again: ${passed.text}`);
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** A new admin key of an org that exists (its first one was made by the earlier start). */
async function createOrgKey(url: string, org: string): Promise<string> {
  const made = await call(url, 'POST', `/organizations/${org}/api-keys`, { token: ADMIN_TOKEN, json: { role: 'admin' } });
  assert.equal(made.status, 201, made.text);
  return String((made.body as { key: string }).key);
}
