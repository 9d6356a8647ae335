// `sluice sign`: prints Standard Webhooks headers for a body as curl `-H` arguments, so a newcomer
// can send a correctly signed webhook from the shell without writing code.

import { createHmac } from 'node:crypto';
import { parseCommandArgs } from './cli-parse-args.ts';
import { credentialOf } from './cli-credential.ts';
import { InputError } from './errors.ts';
import { isDeliveryId } from './ingest/verification.ts';
import { assertSecretsFit, decodeStandardSecret } from './sources/source-record.ts';

/** Returns the curl arguments `-H webhook-id:… -H webhook-timestamp:… -H webhook-signature:v1,…`. */
export function signCommand(args: readonly string[], nowMs: number, env: NodeJS.ProcessEnv = {}): string {
  const { values } = parseCommandArgs({
    args: [...args],
    strict: true,
    options: { secret: { type: 'string' }, id: { type: 'string' }, body: { type: 'string' }, timestamp: { type: 'string' } },
  });
  const { id, body } = values;
  const secret = credentialOf(values.secret, env, 'SLUICE_SIGNING_SECRET');
  if (secret === undefined || id === undefined || body === undefined) {
    throw new InputError(400, 'usage', 'usage: sluice sign [--secret whsec_..., or SLUICE_SIGNING_SECRET] --id <message id> --body <json> [--timestamp <unix seconds>]');
  }
  // The same rules a source applies, so a signature this prints is one a source can verify.
  // Most often an unset shell variable (`--secret "$SECRET"` in a new terminal): say that, not "must be base64".
  if (secret.trim() === '') throw new InputError(400, 'usage', 'The signing secret is empty (is the variable you passed to --secret set in this shell?).');
  assertSecretsFit('standard-webhooks', [secret]);
  // Printed into curl arguments split on spaces ($HDRS), and a source's webhook-id rule anyway.
  if (!isDeliveryId(id)) throw new InputError(400, 'invalid_id', '--id must be 1-256 printable ASCII characters without spaces (the webhook-id a source accepts).');
  const key = decodeStandardSecret(secret) ?? Buffer.alloc(0);
  const timestamp = values.timestamp ?? String(Math.floor(nowMs / 1000));
  if (!/^\d{1,12}$/.test(timestamp)) throw new InputError(400, 'invalid_timestamp', '--timestamp must be unix seconds (digits only)');
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return [
    '-H content-type:application/json',
    `-H webhook-id:${id}`,
    `-H webhook-timestamp:${timestamp}`,
    `-H webhook-signature:v1,${signature}`,
  ].join(' ');
}
