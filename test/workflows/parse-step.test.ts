// Step rules: webhook URL, headers, timeout and retry; custom actions; delays in ms or ISO-8601.
// Each rejection must name the exact field path, e.g. steps[0].retry.max_ms.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseWorkflowInput } from '../../runtime/workflows/parse-workflow.ts';
import type { WorkflowStep } from '../../runtime/workflows/workflow-types.ts';
import { rejects } from './expect-input-error.ts';

const withSteps = (...steps: unknown[]) => ({ name: 'w', trigger_event: 'order.created', steps });
const webhook = (extra: Record<string, unknown> = {}) => ({ type: 'webhook', url: 'https://hooks.example.com/in', ...extra });
const only = (step: unknown): WorkflowStep => {
  const [parsed] = parseWorkflowInput(withSteps(step), undefined, { newStepId: () => 'gen' }).steps;
  assert.ok(parsed);
  return parsed;
};

describe('webhook steps', () => {
  it('requires an absolute http(s) URL without credentials', () => {
    rejects(withSteps(webhook({ url: 'not a url' })), 'invalid_url', 'steps[0].url');
    rejects(withSteps(webhook({ url: '/relative/path' })), 'invalid_url', 'steps[0].url');
    rejects(withSteps(webhook({ url: 'ftp://example.com/x' })), 'invalid_url', 'steps[0].url');
    rejects(withSteps(webhook({ url: 'https://user:pw@example.com/' })), 'invalid_url', 'steps[0].url');
    rejects(withSteps(webhook({ url: 42 })), 'invalid_request', 'steps[0].url');
    rejects(withSteps({ type: 'webhook' }), 'invalid_request', 'steps[0].url');
    rejects(withSteps(webhook(), webhook({ url: 'javascript:alert(1)' })), 'invalid_url', 'steps[1].url');
    const step = only(webhook({ url: 'http://example.com:8080/a?b=1' }));
    assert.ok(step.type === 'webhook');
    assert.equal(step.url, 'http://example.com:8080/a?b=1');
  });

  it('refuses a host name no resolver can look up (RFC 1035 label and name lengths, empty labels), and keeps those at the limits', () => {
    const label63 = 'a'.repeat(63);
    for (const host of [`${'a'.repeat(64)}.example`, 'a..b', `${[label63, label63, label63, label63].join('.')}.com`]) {
      rejects(withSteps(webhook({ url: `https://${host}/in` })), 'invalid_url', 'steps[0].url');
    }
    const longest = [label63, label63, label63, 'a'.repeat(61)].join('.');
    assert.equal(longest.length, 253);
    for (const host of [`${label63}.example`, longest, `${longest}.`, 'hooks.example.com.', '127.0.0.1', '[::1]', 'xn--bcher-kva.example', 'localhost']) {
      const step = only(webhook({ url: `https://${host}/in` }));
      assert.ok(step.type === 'webhook' && step.url === `https://${host}/in`, host);
    }
    assert.ok(only(webhook({ url: 'https://bücher.example/in' })), 'an IDN is checked as its punycode');
  });

  it('accepts up to 20 custom headers and refuses transport and signature headers', () => {
    const step = only(webhook({ headers: { 'X-Tenant': 'acme', Authorization: 'Bearer t' } }));
    assert.ok(step.type === 'webhook');
    assert.deepEqual(step.headers, { 'X-Tenant': 'acme', Authorization: 'Bearer t' });
    for (const name of ['Connection', 'transfer-encoding', 'Webhook-Signature', 'webhook-id', 'Idempotency-Key', 'Host', 'Content-Type', 'content-encoding', 'Expect', 'Sluice-Fence', 'sluice-attempt']) {
      rejects(withSteps(webhook({ headers: { [name]: 'x' } })), 'forbidden_header', `steps[0].headers.${name}`);
    }
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v']));
    rejects(withSteps(webhook({ headers: many })), 'invalid_request', 'steps[0].headers');
    rejects(withSteps(webhook({ headers: { 'X-A': 1 } })), 'invalid_request', 'steps[0].headers.X-A');
    rejects(withSteps(webhook({ headers: { 'X-A': 'a\r\nInjected: 1' } })), 'invalid_request', 'steps[0].headers.X-A');
    rejects(withSteps(webhook({ headers: { 'X-A': 'a→b' } })), 'invalid_request', 'steps[0].headers.X-A');
    assert.ok(only(webhook({ headers: { 'X-A': 'spaced value ~!' } })), 'spaces and printable ASCII are fine');
    rejects(withSteps(webhook({ headers: { 'Bad Name': 'v' } })), 'invalid_request', 'steps[0].headers.Bad Name');
    // Parsed JSON makes "__proto__" an own key; storage would read it back renamed, so it is refused.
    rejects(withSteps(webhook({ headers: JSON.parse('{"__proto__":"v","X-A":"1"}') })), 'invalid_request', 'steps[0].headers.__proto__');
    rejects(withSteps(webhook({ headers: { 'x-a': '1', 'X-A': '2' } })), 'invalid_request', 'steps[0].headers.X-A');
  });

  it('bounds timeout_ms to 100..60000', () => {
    rejects(withSteps(webhook({ timeout_ms: 99 })), 'invalid_request', 'steps[0].timeout_ms');
    rejects(withSteps(webhook({ timeout_ms: 60_001 })), 'invalid_request', 'steps[0].timeout_ms');
    // JSON's 1e400 parses as Infinity: out of range, not "not a number".
    assert.match(rejects(withSteps(webhook({ timeout_ms: Number.POSITIVE_INFINITY })), 'invalid_request', 'steps[0].timeout_ms').message, /must be between 100 and 60000/);
    // A made-up name is echoed cut short (the field and the message), however long it was.
    const long = 'h'.repeat(100_000);
    const unknown = rejects(withSteps(webhook({ [long]: 1 })), 'unknown_field', `steps[0].${'h'.repeat(64)}`);
    assert.ok(unknown.message.length < 200, String(unknown.message.length));
    const header = rejects(withSteps(webhook({ headers: { [`x ${long}`]: 'v' } })), 'invalid_request', `steps[0].headers.x ${'h'.repeat(62)}`);
    assert.ok(header.message.length < 200, String(header.message.length));
    rejects(withSteps(webhook({ timeout_ms: 1500.5 })), 'invalid_request', 'steps[0].timeout_ms');
    const step = only(webhook({ timeout_ms: 100 }));
    assert.ok(step.type === 'webhook');
    assert.equal(step.timeout_ms, 100);
  });

  it('completes a partial retry override from the default and checks its ranges', () => {
    const step = only(webhook({ retry: { max_retries: 2 } }));
    assert.ok(step.type === 'webhook');
    assert.deepEqual(step.retry, { max_retries: 2, initial_ms: 30_000, max_ms: 3_600_000 });
    rejects(withSteps(webhook({ retry: { max_retries: 21 } })), 'invalid_request', 'steps[0].retry.max_retries');
    rejects(withSteps(webhook({ retry: { max_retries: -1 } })), 'invalid_request', 'steps[0].retry.max_retries');
    rejects(withSteps(webhook({ retry: { initial_ms: 0 } })), 'invalid_request', 'steps[0].retry.initial_ms');
    rejects(withSteps(webhook({ retry: { initial_ms: 5000, max_ms: 1000 } })), 'invalid_request', 'steps[0].retry.max_ms');
    rejects(withSteps(webhook({ retry: { max_retry: 3 } })), 'unknown_field', 'steps[0].retry.max_retry');
    rejects(withSteps(webhook({ retry: 3 })), 'invalid_request', 'steps[0].retry');
  });

  it('rejects fields of other step types', () => {
    rejects(withSteps(webhook({ duration_ms: 5 })), 'unknown_field', 'steps[0].duration_ms');
  });
});

describe('custom_action steps', () => {
  it('requires a non-empty action_id and allows retry', () => {
    rejects(withSteps({ type: 'custom_action' }), 'invalid_request', 'steps[0].action_id');
    rejects(withSteps({ type: 'custom_action', action_id: '  ' }), 'invalid_request', 'steps[0].action_id');
    rejects(withSteps({ type: 'custom_action', action_id: 'x', url: 'https://e.com' }), 'unknown_field', 'steps[0].url');
    const step = only({ type: 'custom_action', action_id: 'order-risk-scorer', retry: { max_retries: 0 } });
    assert.ok(step.type === 'custom_action');
    assert.equal(step.action_id, 'order-risk-scorer');
    assert.equal(step.retry?.max_retries, 0);
  });
});

describe('delay steps', () => {
  it('takes duration_ms as a positive integer of at most 30 days', () => {
    rejects(withSteps({ type: 'delay', duration_ms: -5 }), 'invalid_duration', 'steps[0].duration_ms');
    rejects(withSteps({ type: 'delay', duration_ms: 0 }), 'invalid_duration', 'steps[0].duration_ms');
    rejects(withSteps({ type: 'delay', duration_ms: 30 * 86_400_000 + 1 }), 'invalid_duration', 'steps[0].duration_ms');
    rejects(withSteps({ type: 'delay', duration_ms: '5000' }), 'invalid_request', 'steps[0].duration_ms');
    assert.deepEqual(only({ type: 'delay', duration_ms: 30 * 86_400_000 }), { id: 'gen', type: 'delay', duration_ms: 2_592_000_000 });
  });

  it('takes an ISO-8601 duration and keeps it for display', () => {
    assert.deepEqual(only({ type: 'delay', duration: 'PT5M' }), { id: 'gen', type: 'delay', duration_ms: 300_000, duration: 'PT5M' });
    const step = only({ type: 'delay', duration: 'P1DT2H' });
    assert.ok(step.type === 'delay');
    assert.equal(step.duration_ms, 26 * 3_600_000);
  });

  it('rejects negative, zero, calendar, malformed and too long ISO durations', () => {
    for (const duration of ['-PT5M', 'PT0S', 'P0D', 'P1M', 'P1Y', 'PT', 'P', '5 minutes', 'P31D', 'P5W']) {
      rejects(withSteps({ type: 'delay', duration }), 'invalid_duration', 'steps[0].duration');
    }
  });

  it('names the ISO shape for a duration that is not one ("1m"), and calendar units only for one that is ("P1M")', () => {
    const messageOf = (duration: string): string => {
      try {
        parseWorkflowInput(withSteps({ type: "delay", duration }));
      } catch (error) {
        return (error as Error).message;
      }
      return assert.fail(`${duration} was accepted`);
    };
    for (const duration of ['1m', '2y', '5M']) assert.match(messageOf(duration), /ISO-8601 duration such as "PT5M"/, duration);
    assert.match(messageOf('P1M'), /years or months/);
  });

  it('needs duration_ms or duration, or both meaning the same time (as the API answers a step, so it can be written back)', () => {
    rejects(withSteps({ type: 'delay' }), 'invalid_request', 'steps[0].duration_ms');
    rejects(withSteps({ type: 'delay', duration_ms: 5, duration: 'PT5S' }), 'invalid_request', 'steps[0].duration');
    assert.deepEqual(only({ type: 'delay', duration_ms: 5000, duration: 'pt5s' }), { id: 'gen', type: 'delay', duration_ms: 5000, duration: 'PT5S' });
    rejects(withSteps({ type: 'delay', duration_ms: 0, duration: 'PT5S' }), 'invalid_duration', 'steps[0].duration_ms');
    rejects(withSteps({ type: 'delay', duration_ms: 5, retry: {} }), 'unknown_field', 'steps[0].retry');
  });
});
