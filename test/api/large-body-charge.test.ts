// A route given a large body reads it before its first await, where the org's share of the event
// loop counts it (large-body-share.ts). Found by review: a workflow's signing-secret rotation and
// update waited for the workflow's write turn before reading theirs, and a 1 MiB body of tiny
// values cost the loop tens of ms each time while being counted as nothing. Told without timing:
// JSON.parse and the share's done() are watched, and the parse must come first.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { LargeBodyShare } from '../../runtime/http/large-body-share.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

// What had been parsed of large JSON texts when each large-body turn was counted: the body is read
// inside the counted part only if its parse came before done().
let largeParses = 0;
const parse = JSON.parse;
JSON.parse = (text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown): unknown => {
  if (typeof text === 'string' && text.length >= 64 * 1024) largeParses += 1;
  return parse(text, reviver);
};
const parsedAtDone: number[] = [];
const done = LargeBodyShare.prototype.done;
LargeBodyShare.prototype.done = function (this: LargeBodyShare, org: string, ms: number) {
  parsedAtDone.push(largeParses);
  done.call(this, org, ms);
};

const ORG = 'acct-large-charge';
let rt: TestRuntime;
let key: string;
let workflowId: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'w', trigger_event: 'e', steps: [{ id: 'wait', type: 'delay', duration: 'PT1H' }] } });
  assert.equal(made.status, 201, made.text);
  workflowId = made.body.workflow.id;
});
after(() => rt.close());

test('a signing-secret rotation and a workflow update read their large body in the part of them the share counts', async () => {
  const body = `[${Array.from({ length: 300_000 }, () => '0').join(',')}]`;
  for (const [method, path] of [['POST', `/organizations/${ORG}/workflows/${workflowId}/signing-secret/rotate`], ['PUT', `/organizations/${ORG}/workflows/${workflowId}`]] as const) {
    largeParses = 0;
    parsedAtDone.length = 0;
    const answer = await call(rt.url, method, path, { token: key, body, headers: { 'content-type': 'application/json' } });
    assert.equal(answer.status, 400, answer.text);
    assert.equal(largeParses, 1, `${method}: the body parsed once`);
    assert.deepEqual(parsedAtDone, [1], `${method}: parsed before its turn was counted`);
  }
});
