// One webhook attempt against real local HTTP servers, for the webhook-send tests: receivers on
// free loopback ports and connection pools, all closed after the file's tests.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { after, mock } from 'node:test';
import { OutboundConnections } from '../../runtime/runs/outbound-connections.ts';
import { sendWebhook, type WebhookOutcome, type WebhookRequest } from '../../runtime/runs/webhook-step.ts';

const servers: NetServer[] = [];
const pools: OutboundConnections[] = [];
after(() => {
  for (const pool of pools) pool.close();
  return Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Closes `server` after the file's tests. */
export function closedAfterTests<S extends NetServer>(server: S): S {
  servers.push(server);
  return server;
}

/** Closes the server made last now (a receiver that went away). */
export function closeLastServer(): Promise<unknown> {
  return new Promise((resolve) => servers.pop()?.close(resolve));
}

/** A pool of outbound connections (`perReceiver` per org and receiver), closed after the file's tests. */
export function connectionPool(perReceiver?: number): OutboundConnections {
  // The receivers here are local: allowed under `any` (the `public` policy has its own tests).
  const pool = new OutboundConnections(perReceiver, 'any');
  pools.push(pool);
  return pool;
}
export const defaultPool = connectionPool();

export interface Local {
  readonly url: string;
  readonly requests: string[];
  connections: number;
}

/** An HTTP receiver on a free loopback port: it records each request's body, then `handle` answers. */
export async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<Local> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push(Buffer.concat(chunks).toString('utf8'));
      handle(req, res);
    });
  });
  closedAfterTests(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const local: Local = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests, connections: 0 };
  server.on('connection', () => {
    local.connections += 1;
  });
  return local;
}

export const attempt = (url: string, overrides: Partial<WebhookRequest> = {}, connections = defaultPool): Promise<WebhookOutcome> =>
  sendWebhook(
    { orgId: 'acct-a', url, headers: {}, timeoutMs: 5000, body: '{"n":1}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.UTC(2026, 10, 30), ...overrides },
    // Their waits and durations on the (mocked) Date, which the tests move.
    { selfPort: 1, connections, elapsedNow: () => Date.now() },
  );

/** Moves the mocked clock by `ms` and tells whether `pending` settled meanwhile. */
export async function settlesWithin(pending: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void pending.then(() => {
    settled = true;
  });
  mock.timers.tick(ms);
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

/** The attempt's error, asserting it failed. */
export const errorOf = (outcome: WebhookOutcome) => {
  assert.equal(outcome.ok, false);
  return outcome.ok ? undefined : outcome.error;
};
