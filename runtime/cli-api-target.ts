// The Sluice a CLI command talks to through the REST client: `<http://host:port>` as its one
// positional argument, `--org`, an API key (`--key`, or SLUICE_API_KEY: see cli-credential.ts) and
// `--environment` (production unless told). Shared by `sluice watch`, `explain` and `replay`.

import { shownUrl } from './shown-url.ts';
import type { Writable } from 'node:stream';
import { credentialOf } from './cli-credential.ts';
import { InputError } from './errors.ts';
import { shownName } from './validation/shown-name.ts';

/** The parseArgs options every such command takes. */
export const API_TARGET_OPTIONS = { org: { type: 'string' }, key: { type: 'string' }, environment: { type: 'string' } } as const;

/** What a one-shot client command (explain, replay) writes to and reads its key from. */
export interface ClientCommandIo {
  readonly stdout: Writable;
  readonly stderr: Writable;
  /** Where SLUICE_API_KEY is read when --key is not given. */
  readonly env?: NodeJS.ProcessEnv;
}

export interface ApiTarget {
  readonly url: string;
  readonly org: string;
  readonly apiKey: string;
  readonly environment: 'production' | 'sandbox';
}

/** Reads the target from parsed arguments; a usage error (400 `usage`, ending with `usage`) when something is missing. */
export function apiTargetOf(values: { readonly org?: string; readonly key?: string; readonly environment?: string }, positionals: readonly string[], env: NodeJS.ProcessEnv, usage: string): ApiTarget {
  const url = positionals[0];
  if (url === undefined) throw new InputError(400, 'usage', usage);
  if (positionals.length !== 1) throw new InputError(400, 'usage', `Give one Sluice URL (got ${positionals.length}: ${positionals.map((p) => JSON.stringify(shownName(shownUrl(p)))).join(', ')}). ${usage}`);
  // A scheme is case-insensitive (RFC 3986): HTTP:// is the same URL, as the client kit takes it.
  if (!/^https?:\/\//i.test(url)) throw new InputError(400, 'usage', `The Sluice URL starts with http:// or https:// (got ${JSON.stringify(shownName(shownUrl(url)))}). ${usage}`);
  const apiKey = credentialOf(values.key, env, 'SLUICE_API_KEY');
  if (values.org === undefined || apiKey === undefined) throw new InputError(400, 'usage', `--org and an API key (--key, or SLUICE_API_KEY) are required. ${usage}`);
  // An unset shell variable (`--org "$ORG"`) names no org.
  if (values.org === '') throw new InputError(400, 'usage', `--org is empty. ${usage}`);
  const environment = values.environment ?? 'production';
  if (environment !== 'production' && environment !== 'sandbox') throw new InputError(400, 'usage', `--environment is production or sandbox. ${usage}`);
  return { url, org: values.org, apiKey, environment };
}
