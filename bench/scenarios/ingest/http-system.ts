// The systems the ingest scenario sends webhooks to over HTTP: Sluice and the two HTTP peers.
// Each starts in its own child process and answers POST <path> with Standard Webhooks verification.

import { join } from 'node:path';
import type { ScenarioContext, SystemRole } from '../../scenario.ts';

/** A started system: where to send, and how to stop it. */
export interface HttpTarget {
  readonly port: number;
  readonly path: string;
  stop(): Promise<void>;
}

export interface HttpSystem {
  readonly system: string;
  readonly label: string;
  readonly role: SystemRole;
  readonly work: string;
  /** Why this system cannot run in this checkout (reported as "not yet measured"), or undefined. */
  missing(context: ScenarioContext): string | undefined;
  /** Starts the system, configured to accept requests signed with `secret`. */
  start(context: ScenarioContext, secret: string): Promise<HttpTarget>;
}

export const BENCH_ORG = 'acct-bench';
export const BENCH_SOURCE = 'stripe-main';
const PEER_PATH = `/hooks/${BENCH_ORG}/${BENCH_SOURCE}`;

function peerSystem(file: string, meta: Pick<HttpSystem, 'system' | 'label' | 'work'>): HttpSystem {
  return {
    ...meta,
    role: 'peer',
    missing: () => undefined,
    async start(context, secret) {
      const server = await context.children.startServer({
        name: meta.system,
        command: process.execPath,
        args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'peers', file), '--port', '0', '--data-dir', context.tempDirs.make(meta.system), '--secret', secret],
        cwd: context.repoRoot,
        timeoutMs: 30_000,
      });
      return { port: server.port, path: PEER_PATH, stop: () => server.stop() };
    },
  };
}

export const uwsHmacPeer = peerSystem('uws-hmac.ts', {
  system: 'uws-hmac',
  label: 'uWS + HMAC only (physical limit)',
  work: 'read body, HMAC-SHA256 + constant-time compare, 204; no dedup, no storage',
});

export const fastifySqlitePeer = peerSystem('fastify-sqlite.ts', {
  system: 'fastify-sqlite',
  label: 'Fastify + standardwebhooks + SQLite',
  work: 'verify (standardwebhooks), parse, INSERT with unique (org, source, id), 204/409; WAL, synchronous=FULL',
});
