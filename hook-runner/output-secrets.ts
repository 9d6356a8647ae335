// Secrets stay in the sandbox: a guest's output becomes a step result, evidence, a projection row
// and a derived event, all read over the API, where secrets never appear (DESIGN §8). So the value
// of every secret the guest was given reads "[redacted]" in its output, as CI systems mask secrets
// in logs. A value too short to be told from ordinary data ("50") is left alone.

import type { InvocationResult } from './invocation-outcome.ts';

export const MASKED = '[redacted]';
/** Secrets shorter than this are not masked: a threshold of "50" is no credential, and masking it would rewrite numbers. */
export const MIN_MASKED_SECRET_CHARS = 8;

/**
 * The result with each secret's value masked in its output, as written raw or JSON-escaped. An
 * output that masking would leave no JSON document (a secret outside a string: a number, part of
 * a literal) becomes a `secret_in_output` trap: nothing of it leaves the runner.
 */
export function maskSecrets(result: InvocationResult, secrets: Readonly<Record<string, string>>): InvocationResult {
  const { outcome } = result;
  if (outcome.kind !== 'output') return result;
  const forms = new Set<string>();
  for (const value of Object.values(secrets)) {
    if (value.length < MIN_MASKED_SECRET_CHARS) continue;
    forms.add(value).add(JSON.stringify(value).slice(1, -1));
  }
  let text = outcome.outputJson;
  for (const form of [...forms].sort((a, b) => b.length - a.length)) text = text.split(form).join(MASKED);
  if (text === outcome.outputJson) return result;
  try {
    JSON.parse(text);
  } catch {
    const message = 'The module output carries the value of a secret outside a JSON string, where it cannot be masked; nothing of it was kept.';
    return { outcome: { kind: 'trap', trap: 'secret_in_output', message }, fuelUsed: result.fuelUsed };
  }
  return { outcome: { kind: 'output', outputJson: text }, fuelUsed: result.fuelUsed };
}
