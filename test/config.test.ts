// The runtime's configuration: defaults, flags over environment variables, and a clear 400-style
// error naming the setting for a value out of range.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadRuntimeConfig } from '../runtime/config.ts';
import { InputError } from '../runtime/errors.ts';

test('webhook connections: 32 by default, the environment sets it, a flag wins over the environment', () => {
  assert.equal(loadRuntimeConfig([], {}).webhookConnections, 32);
  assert.equal(loadRuntimeConfig([], { SLUICE_WEBHOOK_CONNECTIONS: '8' }).webhookConnections, 8);
  assert.equal(loadRuntimeConfig(['--webhook-connections', '4'], { SLUICE_WEBHOOK_CONNECTIONS: '8' }).webhookConnections, 4);
});

test('webhook connections outside 1-1000 or not an integer are refused, naming the flag', () => {
  for (const bad of ['0', '1001', '2.5', 'many']) {
    assert.throws(
      () => loadRuntimeConfig(['--webhook-connections', bad], {}),
      (error: unknown) => error instanceof InputError && error.code === 'invalid_config' && error.message.includes('--webhook-connections') && error.message.includes(`"${bad}"`),
    );
  }
});
