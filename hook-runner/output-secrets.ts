// Secrets stay in the sandbox: a guest's output becomes a step result, evidence, a projection row
// and a derived event, all read over the API, where secrets never appear (DESIGN §8). So the value
// of every secret the guest was given reads "[redacted]" in its output, as CI systems mask secrets
// in logs. A value too short to be told from ordinary data ("50") is left alone. This guards
// against an action echoing what it was given; it cannot see through an encoding the guest chose.

import type { InvocationResult } from './invocation-outcome.ts';
import { maskOccurrences } from './mask-text.ts';

export const MASKED = '[redacted]';
/** Secrets shorter than this are not masked: a threshold of "50" is no credential, and masking it would rewrite numbers. */
export const MIN_MASKED_SECRET_CHARS = 8;

/** Whether a decoded string or key of the parsed output still holds one of the secrets. */
function holdsSecret(value: unknown, secrets: readonly string[]): boolean {
  if (typeof value === 'string') return secrets.some((secret) => value.includes(secret));
  if (Array.isArray(value)) return value.some((item) => holdsSecret(item, secrets));
  if (value === null || typeof value !== 'object') return false;
  return Object.entries(value).some(([key, item]) => holdsSecret(key, secrets) || holdsSecret(item, secrets));
}

/**
 * The result with each secret's value masked in its output strings, as written raw or escaped as
 * JSON.stringify escapes it. An output masking cannot make safe becomes a `secret_in_output` trap,
 * and nothing of it leaves the runner: a secret in an object key (masking would change the
 * output's shape), outside a string (a number), or in another escaping (`\/`, `\u0073`).
 */
export function maskSecrets(result: InvocationResult, secrets: Readonly<Record<string, string>>): InvocationResult {
  const { outcome } = result;
  if (outcome.kind !== 'output') return result;
  const values = Object.values(secrets).filter((value) => value.length >= MIN_MASKED_SECRET_CHARS);
  if (values.length === 0) return result;
  const refused = (where: string): InvocationResult => ({
    outcome: { kind: 'trap', trap: 'secret_in_output', message: `The module output carries the value of a secret ${where}, where it cannot be masked; nothing of it was kept.` },
    fuelUsed: result.fuelUsed,
  });
  const keys = (value: unknown): string[] =>
    Array.isArray(value) ? value.flatMap(keys) : value === null || typeof value !== 'object' ? [] : Object.entries(value).flatMap(([key, item]) => [key, ...keys(item)]);
  if (keys(JSON.parse(outcome.outputJson)).some((key) => holdsSecret(key, values))) return refused('in an object key');
  const forms = values.flatMap((value) => [value, JSON.stringify(value).slice(1, -1)]);
  const text = maskOccurrences(outcome.outputJson, forms, MASKED);
  if (text === outcome.outputJson) return holdsSecret(JSON.parse(text), values) ? refused('in an escaped form') : result;
  let masked: unknown;
  try {
    masked = JSON.parse(text);
  } catch {
    return refused('outside a JSON string');
  }
  return holdsSecret(masked, values) ? refused('in an escaped form') : { outcome: { kind: 'output', outputJson: text }, fuelUsed: result.fuelUsed };
}
