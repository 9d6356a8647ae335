// A small HTTP client for tests over real sockets (fetch), plus Standard Webhooks signing.
// Every call returns status, headers and the parsed JSON body (or undefined when there is none).

import { createHmac, randomBytes } from 'node:crypto';

export interface CallResult {
  readonly status: number;
  readonly headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON shapes
  readonly body: any;
  readonly text: string;
}

export interface CallOptions {
  readonly token?: string;
  readonly json?: unknown;
  readonly body?: string | Buffer;
  readonly headers?: Record<string, string>;
}

export async function call(baseUrl: string, method: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | Buffer | undefined = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
  return readResult(response);
}

/** Status, headers, text and parsed JSON (undefined when the body is empty or not JSON) of a fetch answer. */
export async function readResult(response: Response): Promise<CallResult> {
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** Standard Webhooks headers for `body`, signed with `secret` (`whsec_…`). */
export function signStandard(secret: string, id: string, timestampSeconds: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${signature}`,
  };
}

/**
 * A fresh Standard Webhooks secret with a random 32-byte key. (Keys made from the clock were equal
 * whenever two calls were a multiple of 256 ms apart: a "rotated" secret was then the same one.)
 */
export function newStandardSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Creates an org (as platform admin) and returns its admin API key. */
export async function createOrg(baseUrl: string, adminToken: string, id: string, plan = 'pro'): Promise<string> {
  const result = await call(baseUrl, 'POST', '/organizations', { token: adminToken, json: { id, name: id, plan } });
  if (result.status !== 201) throw new Error(`creating org ${id} failed: ${result.status} ${result.text}`);
  return result.body.api_key as string;
}

/** Registers device `name` (with `json`'s other fields) in the org with its key; answers the device's token. */
export async function registerDevice(baseUrl: string, orgId: string, key: string, name: string, json: Record<string, unknown> = {}): Promise<string> {
  const result = await call(baseUrl, 'POST', `/organizations/${orgId}/devices`, { token: key, json: { name, ...json } });
  if (result.status !== 201) throw new Error(`registering device ${name} failed: ${result.status} ${result.text}`);
  return result.body.token as string;
}
