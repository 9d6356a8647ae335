// A route given a large body reads it before its first await, where the org's share of the event
// loop counts it (large-body-share.ts). Found by review: a workflow's signing-secret rotation and
// update waited for the workflow's write turn before reading theirs, and a 1 MiB body of tiny
// values cost the loop tens of ms each time while being counted as nothing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { LargeBodyShare } from '../../runtime/http/large-body-share.ts';
import { decodeJsonBytes } from '../../runtime/http/parse-json.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const charged: number[] = [];
const done = LargeBodyShare.prototype.done;
LargeBodyShare.prototype.done = function (this: LargeBodyShare, org: string, ms: number) {
  charged.push(ms);
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

test('a signing-secret rotation and a workflow update are counted for reading their large body', async () => {
  const body = `[${Array.from({ length: 300_000 }, () => '0').join(',')}]`;
  // What reading it takes here, as the reference (the routes read it that way, and judge it after): the quickest of three.
  let readMs = Infinity;
  for (let i = 0; i < 3; i += 1) {
    const began = performance.now();
    decodeJsonBytes(Buffer.from(body));
    readMs = Math.min(readMs, performance.now() - began);
  }
  for (const [method, path] of [['POST', `/organizations/${ORG}/workflows/${workflowId}/signing-secret/rotate`], ['PUT', `/organizations/${ORG}/workflows/${workflowId}`]] as const) {
    charged.length = 0;
    const answer = await call(rt.url, method, path, { token: key, body, headers: { 'content-type': 'application/json' } });
    assert.equal(answer.status, 400, answer.text);
    assert.equal(charged.length, 1, path);
    assert.ok(charged[0]! >= readMs / 2, `${method} counted ${charged[0]!.toFixed(2)} ms; reading the body takes ${readMs.toFixed(2)} ms`);
  }
});
