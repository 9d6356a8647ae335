// Secrets stay in the sandbox: a guest's output becomes a step result, evidence, a projection row
// and a derived event, all read over the API, where secrets never appear (DESIGN §8). So the value
// of every secret the guest was given reads "[redacted]" in its output, as CI systems mask secrets
// in logs. A value too short to be told from ordinary data ("50") is left alone. This guards
// against an action echoing what it was given; it cannot see through an encoding the guest chose.

import type { InvocationResult } from './invocation-outcome.ts';
import { OccurrenceCover } from './mask-text.ts';
import { WorkSlices } from './work-slices.ts';

export const MASKED = '[redacted]';
/** Secrets shorter than this are not masked: a threshold of "50" is no credential, and masking it would rewrite numbers. */
export const MIN_MASKED_SECRET_CHARS = 8;

/**
 * Every decoded string of a parsed output, with whether it is an object key. A walk with its own
 * stack, not recursion: a guest's output may nest as deep as its size allows.
 */
function* stringsOf(root: unknown): Generator<{ readonly text: string; readonly key: boolean }> {
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') yield { text: value, key: false };
    else if (Array.isArray(value)) for (const item of value) pending.push(item);
    else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        yield { text: key, key: true };
        pending.push(item);
      }
    }
  }
}

/** Whether a decoded string (only keys, with `keysOnly`) of the parsed output holds one of the secrets; yields between slices. */
async function holdsSecret(parsed: unknown, secrets: readonly string[], slices: WorkSlices, keysOnly = false): Promise<boolean> {
  for (const { text, key } of stringsOf(parsed)) {
    if (!key && keysOnly) continue;
    for (const secret of secrets) {
      if (text.includes(secret)) return true;
      if (slices.due()) await slices.yield();
    }
  }
  return false;
}

/**
 * Whether `masked` is `original` with only string values changed: the same keys in the same order,
 * the same array lengths, numbers, booleans and nulls. A secret whose raw text spans JSON structure
 * (`x","b":"y`) is masked into a document that still parses but lost members. A walk with its own stack.
 */
function sameShape(original: unknown, masked: unknown): boolean {
  const pending: Array<[unknown, unknown]> = [[original, masked]];
  while (pending.length > 0) {
    const [a, b] = pending.pop()!;
    if (typeof a === 'string' && typeof b === 'string') continue;
    if (Array.isArray(a)) {
      if (!Array.isArray(b) || a.length !== b.length) return false;
      a.forEach((item, i) => pending.push([item, b[i]]));
    } else if (a !== null && typeof a === 'object') {
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return false;
      const left = Object.entries(a);
      const right = Object.entries(b);
      if (left.length !== right.length) return false;
      for (let i = 0; i < left.length; i += 1) {
        if (left[i]![0] !== right[i]![0]) return false;
        pending.push([left[i]![1], right[i]![1]]);
      }
    } else if (!Object.is(a, b)) return false;
  }
  return true;
}

/**
 * The result with each secret's value masked in its output strings, as written raw or escaped as
 * JSON.stringify escapes it. An output masking cannot make safe becomes a `secret_in_output` trap,
 * and nothing of it leaves the runner: a secret in an object key (masking would change the
 * output's shape), outside a string (a number), across strings (its raw text holding a quote), or in
 * another escaping (`\/`, `\u0073`). The scans run in slices (work-slices.ts): the guest's org
 * chooses both the output and the secrets, and other calls are served between them.
 */
export async function maskSecrets(result: InvocationResult, secrets: Readonly<Record<string, string>>, slices = new WorkSlices()): Promise<InvocationResult> {
  const { outcome } = result;
  if (outcome.kind !== 'output') return result;
  const values = Object.values(secrets).filter((value) => value.length >= MIN_MASKED_SECRET_CHARS);
  if (values.length === 0) return result;
  const refused = (where: string): InvocationResult => ({
    outcome: { kind: 'trap', trap: 'secret_in_output', message: `The module output carries the value of a secret ${where}, where it cannot be masked; nothing of it was kept.` },
    fuelUsed: result.fuelUsed,
  });
  const parsed: unknown = JSON.parse(outcome.outputJson);
  if (await holdsSecret(parsed, values, slices, true)) return refused('in an object key');
  // Most values need no escaping: their escaped form is the same text, scanned once.
  const forms = new Set(values.flatMap((value) => [value, JSON.stringify(value).slice(1, -1)]));
  const covering = new OccurrenceCover(outcome.outputJson);
  for (const form of forms) {
    covering.cover(form);
    if (slices.due()) await slices.yield();
  }
  const text = covering.masked(MASKED);
  if (text === outcome.outputJson) return (await holdsSecret(parsed, values, slices)) ? refused('in an escaped form') : result;
  let masked: unknown;
  try {
    masked = JSON.parse(text);
  } catch {
    return refused('outside a JSON string');
  }
  if (!sameShape(parsed, masked)) return refused('across JSON strings');
  return (await holdsSecret(masked, values, slices)) ? refused('in an escaped form') : { outcome: { kind: 'output', outputJson: text }, fuelUsed: result.fuelUsed };
}
