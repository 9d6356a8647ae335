// The keep-alive connection pools webhook steps send through: one pool per org and receiver origin,
// at most `perReceiver` sockets each; a request beyond that waits in its pool's FIFO queue.
// Without the cap a burst of runs opened one socket per run (file descriptors, the receiver's
// patience); keying by org keeps one tenant's burst to a shared receiver from queueing another's.

import { Agent as HttpAgent, type AgentOptions, type ClientRequestArgs } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';

/** Default of `--webhook-connections`: sockets per org and receiver origin. */
export const DEFAULT_WEBHOOK_CONNECTIONS = 32;

/** The request option that names the pool's org (Node passes request options on to `getName`). */
export interface PooledRequestOptions {
  readonly agent: HttpAgent;
  readonly poolOrg: string;
}

const poolName = (base: string, options: ClientRequestArgs | undefined): string =>
  `${base}|${String((options as { poolOrg?: unknown } | undefined)?.poolOrg ?? '')}`;

class OrgHttpAgent extends HttpAgent {
  override getName(options?: ClientRequestArgs): string {
    return poolName(super.getName(options), options);
  }
}

class OrgHttpsAgent extends HttpsAgent {
  override getName(options?: ClientRequestArgs): string {
    return poolName(super.getName(options), options);
  }
}

export class OutboundConnections {
  readonly #http: HttpAgent;
  readonly #https: HttpsAgent;

  constructor(readonly perReceiver: number = DEFAULT_WEBHOOK_CONNECTIONS) {
    // LIFO keeps the most recently used sockets warm and lets idle ones time out.
    const options: AgentOptions = { keepAlive: true, scheduling: 'lifo', maxSockets: perReceiver };
    this.#http = new OrgHttpAgent(options);
    this.#https = new OrgHttpsAgent(options);
  }

  /** What to merge into the request options of a POST to `url` on behalf of `orgId`. */
  pooled(url: URL, orgId: string): PooledRequestOptions {
    return { agent: url.protocol === 'https:' ? this.#https : this.#http, poolOrg: orgId };
  }

  /** Closes every socket; requests still in flight fail with a network error. */
  close(): void {
    this.#http.destroy();
    this.#https.destroy();
  }
}
