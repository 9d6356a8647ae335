// If-Match on the PATCHes and DELETEs of sources, devices, schedules and organizations: every answer
// naming one carries its ETag; a write naming a tag the record no longer has is 412 etag_mismatch and
// writes nothing (a DELETE too, as RFC 9110 asks: it had been ignored there); two
// editors sending the same tag at once get one 200 and one 412 (the check runs inside the write);
// and writes in one millisecond (the clock here never moves) still give each its own tag, as does
// a record deleted and made again under its name. A second organization DELETE while the first's mark
// is written is checked against its own tag.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, type CallResult } from '../helpers/http.ts';
import { gateNextCall, whileCallHeld } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';

const ORG = 'acct-if-match';
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const clock = new ManualClock(Date.parse('2026-12-07T09:00:00.000Z'));
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

const tagOf = (answer: CallResult): string => {
  const tag = answer.headers.get('etag');
  assert.ok(tag !== null && /^"[^"]+"$/.test(tag), `an ETag: ${String(tag)}`);
  return tag;
};
const patch = (path: string, json: unknown, ifMatch?: string) => call(rt.url, 'PATCH', path, { token: key, json, ...(ifMatch === undefined ? {} : { headers: { 'if-match': ifMatch } }) });
const schema = (field: string) => ({ 'order.paid': { type: 'object', required: [field] } });

/** What each kind is made with, one change a PATCH may send, and how to read that change back. */
const KINDS = [
  { kind: 'source', path: `/organizations/${ORG}/sources`, make: (name: string) => ({ name, secrets: [SECRET] }), change: (n: number) => ({ event_types: schema(`f${n}`) }), changed: (body: any) => Object.values(body.source.event_types as Record<string, any>)[0]?.required[0] },
  { kind: 'device', path: `/organizations/${ORG}/devices`, make: (name: string) => ({ name }), change: (n: number) => ({ event_types: schema(`f${n}`) }), changed: (body: any) => Object.values(body.device.event_types as Record<string, any>)[0]?.required[0] },
  { kind: 'schedule', path: `/organizations/${ORG}/schedules`, make: (name: string) => ({ name, cron: '0 * * * *', event_type: 'tick.hourly' }), change: (n: number) => ({ payload: { n } }), changed: (body: any) => `f${body.schedule.payload.n}` },
] as const;

for (const { kind, path, make, change, changed } of KINDS) {
  describe(`${kind} PATCH with If-Match`, () => {
    it('answers the ETag on create, read and update; a stale tag is 412 and writes nothing', async () => {
      const name = `${kind}-stale`;
      const made = await call(rt.url, 'POST', path, { token: key, json: make(name) });
      assert.equal(made.status, 201, made.text);
      const first = tagOf(made);
      assert.equal(tagOf(await call(rt.url, 'GET', `${path}/${name}`, { token: key })), first, 'a read answers the tag the create did');

      const updated = await patch(`${path}/${name}`, change(1), first);
      assert.equal(updated.status, 200, updated.text);
      const second = tagOf(updated);
      assert.notEqual(second, first, 'a write in the same millisecond still moves the tag');

      const stale = await patch(`${path}/${name}`, change(2), first);
      assert.equal(stale.status, 412, stale.text);
      assert.equal(stale.body.error.code, 'etag_mismatch');
      assert.equal(stale.body.error.current_etag, second);
      const read = await call(rt.url, 'GET', `${path}/${name}`, { token: key });
      assert.equal(changed(read.body), 'f1', 'the refused change was not written');
      assert.equal(tagOf(read), second);

      assert.equal((await patch(`${path}/${name}`, change(3), `"other", ${second}`)).status, 200, 'a list is met by any of its tags');
      assert.equal((await patch(`${path}/${name}`, change(4), '*')).status, 200, '* asks only that it exists');
      const weak = await patch(`${path}/${name}`, change(5), `W/${tagOf(await call(rt.url, 'GET', `${path}/${name}`, { token: key }))}`);
      assert.equal(weak.status, 412, 'a weak tag never matches');
      const malformed = await patch(`${path}/${name}`, change(6), 'not-quoted');
      assert.deepEqual([malformed.status, malformed.body.error.code], [400, 'invalid_if_match']);
      assert.equal(changed((await call(rt.url, 'GET', `${path}/${name}`, { token: key })).body), 'f4');
    });

    it('a change made without If-Match in the same millisecond still fails a tag read before it', async () => {
      const name = `${kind}-unguarded`;
      assert.equal((await call(rt.url, 'POST', path, { token: key, json: make(name) })).status, 201);
      const read = tagOf(await patch(`${path}/${name}`, change(1)));
      assert.equal((await patch(`${path}/${name}`, change(2))).status, 200, 'another editor, no If-Match');
      const late = await patch(`${path}/${name}`, change(3), read);
      assert.equal(late.status, 412, late.text);
      assert.equal(changed((await call(rt.url, 'GET', `${path}/${name}`, { token: key })).body), 'f2');
    });

    it('one deleted and made again under its name in the same millisecond has another tag: the old one is 412', async () => {
      const name = `${kind}-remade`;
      const old = tagOf(await call(rt.url, 'POST', path, { token: key, json: make(name) }));
      assert.equal((await call(rt.url, 'DELETE', `${path}/${name}`, { token: key })).status, 204);
      const remade = await call(rt.url, 'POST', path, { token: key, json: make(name) });
      assert.equal(remade.status, 201, remade.text);
      assert.notEqual(tagOf(remade), old);
      const stale = await patch(`${path}/${name}`, change(1), old);
      assert.equal(stale.status, 412, stale.text);
    });

    it('a DELETE with a stale tag is 412 and removes nothing; a malformed one is 400; the current tag removes it', async () => {
      const name = `${kind}-delete`;
      const first = tagOf(await call(rt.url, 'POST', path, { token: key, json: make(name) }));
      const second = tagOf(await patch(`${path}/${name}`, change(1)));
      const remove = (ifMatch: string) => call(rt.url, 'DELETE', `${path}/${name}`, { token: key, headers: { 'if-match': ifMatch } });
      const stale = await remove(first);
      assert.deepEqual([stale.status, stale.body.error.code, stale.body.error.current_etag], [412, 'etag_mismatch', second], stale.text);
      const malformed = await remove('garbage-not-a-tag');
      assert.deepEqual([malformed.status, malformed.body.error.code], [400, 'invalid_if_match']);
      assert.equal(changed((await call(rt.url, 'GET', `${path}/${name}`, { token: key })).body), 'f1', 'still there, unchanged');
      assert.equal((await remove(second)).status, 204);
      assert.equal((await call(rt.url, 'GET', `${path}/${name}`, { token: key })).status, 404);
    });

    it('a PATCH sent with the same tag while the DELETE waits for its write: exactly one lands (the tag is checked inside the write)', async () => {
      const name = `${kind}-patch-then-delete`;
      const tag = tagOf(await call(rt.url, 'POST', path, { token: key, json: make(name) }));
      // The delete is held just before its write; the PATCH is sent meanwhile. A source being
      // deleted is already gone to a PATCH (404); a device or schedule PATCH lands, and the delete
      // then finds another tag (412).
      const held = gateNextCall(rt.runtime.ledger.root, 'transaction');
      const removing = call(rt.url, 'DELETE', `${path}/${name}`, { token: key, headers: { 'if-match': tag } });
      let patched: CallResult | undefined;
      await whileCallHeld(held, removing, 'the delete', async () => {
        patched = await patch(`${path}/${name}`, change(1), tag);
      });
      const removed = await removing;
      const outcome = [patched?.status, removed.status];
      assert.deepEqual(outcome, kind === 'source' ? [404, 204] : [200, 412], `${patched?.text} / ${removed.text}`);
      const read = await call(rt.url, 'GET', `${path}/${name}`, { token: key });
      if (removed.status === 412) assert.equal(changed(read.body), 'f1', 'the change stands');
      else assert.equal(read.status, 404);
    });

    it('two editors sending the same tag at once: one lands, the other is 412', async () => {
      const name = `${kind}-race`;
      const tag = tagOf(await call(rt.url, 'POST', path, { token: key, json: make(name) }));
      const answers = await Promise.all([patch(`${path}/${name}`, change(1), tag), patch(`${path}/${name}`, change(2), tag)]);
      assert.deepEqual(answers.map((answer) => answer.status).sort(), [200, 412], answers.map((answer) => answer.text).join('\n'));
      const winner = answers.find((answer) => answer.status === 200)!;
      const read = await call(rt.url, 'GET', `${path}/${name}`, { token: key });
      assert.equal(changed(read.body), changed(winner.body));
      assert.equal(tagOf(read), tagOf(winner));
    });
  });
}

it('a device token rotation moves its ETag (a PATCH made from the device read before it is 412)', async () => {
  const path = `/organizations/${ORG}/devices`;
  const tag = tagOf(await call(rt.url, 'POST', path, { token: key, json: { name: 'rotated' } }));
  const rotated = await call(rt.url, 'POST', `${path}/rotated/token`, { token: key });
  assert.equal(rotated.status, 200, rotated.text);
  assert.notEqual(tagOf(rotated), tag);
  assert.equal((await patch(`${path}/rotated`, { event_types: schema('a') }, tag)).status, 412);
  assert.equal((await patch(`${path}/rotated`, { event_types: schema('a') }, tagOf(rotated))).status, 200);
});

it('an organization PATCH with If-Match (platform admin): the tag of its create and read; a stale one is 412; two at once, one lands', async () => {
  const org = 'acct-if-match-org';
  const made = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: org, name: 'First' } });
  assert.equal(made.status, 201, made.text);
  const orgKey = made.body.api_key as string;
  const first = tagOf(made);
  assert.equal(tagOf(await call(rt.url, 'GET', `/organizations/${org}`, { token: orgKey })), first);
  const patchOrg = (json: unknown, ifMatch: string) => call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json, headers: { 'if-match': ifMatch } });
  const renamed = await patchOrg({ name: 'Second' }, first);
  assert.equal(renamed.status, 200, renamed.text);
  assert.notEqual(tagOf(renamed), first, 'a write in the same millisecond still moves the tag');
  const stale = await patchOrg({ max_concurrent_runs: 3 }, first);
  assert.deepEqual([stale.status, stale.body.error.code, stale.body.error.current_etag], [412, 'etag_mismatch', tagOf(renamed)], stale.text);
  const read = await call(rt.url, 'GET', `/organizations/${org}`, { token: orgKey });
  assert.deepEqual([read.body.organization.name, read.body.organization.max_concurrent_runs], ['Second', made.body.organization.max_concurrent_runs], 'the refused change was not written');
  const both = await Promise.all([patchOrg({ name: 'Third' }, tagOf(renamed)), patchOrg({ name: 'Fourth' }, tagOf(renamed))]);
  assert.deepEqual(both.map((answer) => answer.status).sort(), [200, 412], both.map((answer) => answer.text).join('\n'));
  assert.equal((await call(rt.url, 'GET', `/organizations/${org}`, { token: orgKey })).body.organization.name, both.find((answer) => answer.status === 200)!.body.organization.name);
});

it('an organization DELETE with a stale tag is 412 and deletes nothing (it cannot be undone); with its tag it is deleted, and asked again answers the deletion whatever the tag', async () => {
  const org = 'acct-if-match-gone';
  const made = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: org, name: 'First' } });
  assert.equal(made.status, 201, made.text);
  const renamed = await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { name: 'Second' } });
  const remove = (ifMatch: string) => call(rt.url, 'DELETE', `/organizations/${org}`, { token: ADMIN_TOKEN, headers: { 'if-match': ifMatch } });
  // Refused before its write: the mark fences the org off while it is written, and a stale tag
  // checked only there had every request of the org answered 404 meanwhile.
  const held = gateNextCall(rt.runtime.ledger.root, 'transaction');
  const stale = await remove(tagOf(made));
  const wrote = held.reached();
  held.done();
  assert.equal(wrote, false, 'the refused delete wrote nothing, fenced nothing');
  assert.deepEqual([stale.status, stale.body.error.code, stale.body.error.current_etag], [412, 'etag_mismatch', tagOf(renamed)], stale.text);
  assert.equal((await call(rt.url, 'GET', `/organizations/${org}`, { token: made.body.api_key })).status, 200, 'not deleted, its key still works');
  assert.deepEqual([(await remove('nope')).status], [400]);
  // A second DELETE while the first's mark is written has its own tag checked: it got the first's answer.
  const marking = gateNextCall(rt.runtime.ledger.root, 'transaction');
  const deleted = remove(tagOf(renamed));
  let alongside: Promise<CallResult> | undefined;
  await whileCallHeld(marking, deleted, 'the deletion', async () => {
    // Answered while the mark is held (it waited for it, and got its 202, before).
    let answered: CallResult | undefined;
    void remove(tagOf(made)).then((answer) => (answered = answer));
    const staleAlongside = (await eventually('the stale DELETE answered', () => answered, (answer) => answer !== undefined))!;
    assert.deepEqual([staleAlongside.status, staleAlongside.body.error?.code], [412, 'etag_mismatch'], staleAlongside.text);
    alongside = remove(tagOf(renamed));
  });
  assert.equal((await deleted).status, 202, (await deleted).text);
  assert.equal((await alongside!).status, 202);
  assert.equal((await remove(tagOf(made))).status === 412, false, 'a deletion already made answers its record');
});

it("an organization stored before records had `updated_at` is deleted with the tag its reads give out (the write's check read the record as stored: a tag ending NaN)", async () => {
  const org = 'acct-if-match-legacy';
  const made = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: org, name: 'Legacy' } });
  assert.equal(made.status, 201, made.text);
  const { updated_at: _written, ...legacy } = rt.runtime.ledger.orgs.get([org]) as Record<string, unknown>;
  await rt.runtime.ledger.orgs.put([org], legacy);
  const read = await call(rt.url, 'GET', `/organizations/${org}`, { token: ADMIN_TOKEN });
  assert.equal(read.body.organization.updated_at, read.body.organization.created_at, 'read as last written when made');
  const deleted = await call(rt.url, 'DELETE', `/organizations/${org}`, { token: ADMIN_TOKEN, headers: { 'if-match': tagOf(read) } });
  assert.equal(deleted.status, 202, deleted.text);
});
