// The keep-alive connection pools webhook steps send through: one pool per org and receiver origin,
// at most `perReceiver` sockets each; a request beyond that waits in its pool's FIFO queue.
// Without the cap a burst of runs opened one socket per run (file descriptors, the receiver's
// patience); keying by org keeps one tenant's burst to a shared receiver from queueing another's.

import { Agent as HttpAgent, type AgentOptions, type ClientRequest, type ClientRequestArgs } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Duplex } from 'node:stream';
import { connectionLookup, type ConnectionLookup, type WebhookTargets } from './webhook-address-policy.ts';
import { ReceiverResolver } from './receiver-lookup.ts';
import { OrgIdleSockets } from './idle-sockets.ts';
import { OrgSocketShare } from './org-socket-share.ts';

/** Default of `--webhook-connections`: sockets per org and receiver origin. */
export const DEFAULT_WEBHOOK_CONNECTIONS = 32;

/** The request option that names the pool's org (Node passes request options on to `getName`). */
export interface PooledRequestOptions {
  readonly agent: HttpAgent;
  readonly poolOrg: string;
}

/**
 * A request option asked when a request that waited for room in its org's share gets it: true when
 * the request was withdrawn then (its run no longer wants it; it is failed and destroyed), so no
 * connection is opened for it.
 */
export interface WithdrawableRequestOptions {
  readonly poolWithdraw?: () => boolean;
}

/** One org's pool for one receiver, as a request uses it. */
export interface OutboundPool {
  /** Merged into the request options. */
  readonly requestOptions: PooledRequestOptions;
  /**
   * Registers the request for its lifetime; returns the release. `cancel` is called if the pools
   * close first; `endAnswer` when a stop begins: it ends the body of a request already answered
   * (true if so), so that its answer settles while the run engine still records it.
   */
  untilClosed(cancel: () => void, endAnswer: () => boolean): () => void;
  /** A stop began: an answer that comes now is to end its body at once (see untilClosed). */
  stopping(): boolean;
  /** True right after the request is made when it waits for a socket (its pool is at its cap). */
  isQueued(request: ClientRequest): boolean;
  /** Takes a request that waits for a socket out of its queue (withdrawn: it is never sent). */
  drop(request: ClientRequest): void;
}

/**
 * Idle keep-alive sockets close after this: below the 5 s keep-alive timeout of Node's own HTTP
 * server (and many others), so a request rarely picks a socket the receiver is closing.
 */
export const IDLE_SOCKET_MS = 4000;

const poolOrgOf = (options: ClientRequestArgs | undefined): string => String((options as { poolOrg?: unknown } | undefined)?.poolOrg ?? '');
const poolName = (base: string, options: ClientRequestArgs | undefined): string => `${base}|${poolOrgOf(options)}`;

/** The lookup a connection to `port` uses (webhook-address-policy.ts, connectionLookup). */
type LookupForPort = (port: number) => ConnectionLookup;

/**
 * The connection's own lookup, which knows its port (the self check needs it), beside the request's
 * options; a host written with its trailing dot (fully qualified) is named without it in TLS's SNI,
 * as RFC 6066 has it (Node sends it as written).
 */
const withLookup = (options: ClientRequestArgs, lookup: ConnectionLookup): ClientRequestArgs => ({
  ...options,
  lookup,
  ...(typeof options.host === 'string' && options.host.endsWith('.') ? { servername: options.host.slice(0, -1) } : {}),
});

/** Sockets whose receiver's name has been looked up (answered or failed). */
const lookedUp = new WeakSet<object>();

/**
 * Whether `socket`'s name lookup is over: a deadline before then is the lookup's, after it the
 * connection's (outbound-post.ts). Marked here, not heard from the socket's `lookup` event: a
 * request hears of its socket a turn after it was made, and a name from the hosts file (or
 * `localhost`) resolves within that turn, so the event had passed and a connection that then never
 * opened was reported as a name that did not resolve.
 */
export const nameLookedUp = (socket: object): boolean => lookedUp.has(socket);

/**
 * An agent class (http's or https's) whose pools are per org (`poolOrg` in the request options),
 * whose connections resolve with their own lookup, which knows their port, whose idle sockets
 * count against their org's idle share (idle-sockets.ts), and whose sockets, busy or idle, against
 * its share of all (org-socket-share.ts). (`...args: any[]`: the only constructor type TypeScript
 * takes for a class a function extends.)
 */
function orgPooled<B extends new (...args: any[]) => HttpAgent>(Base: B, lookupFor: LookupForPort, idle: OrgIdleSockets, share: OrgSocketShare, holding: () => boolean): B {
  /** The org each socket was opened for. */
  const orgs = new WeakMap<object, string>();
  /** Node's own addRequest (not in its typings): reuses a free socket, opens one, or queues at the origin's cap. */
  const addRequest = (Base.prototype as unknown as { addRequest: (this: HttpAgent, ...args: unknown[]) => void }).addRequest;
  return class extends Base {
    override getName(options?: ClientRequestArgs): string {
      return poolName(super.getName(options), options);
    }

    /**
     * A request that would open a socket past its org's share waits for one of the org's to close.
     * While the pools hold what is unsent (a stop), a request gets no socket at all.
     */
    addRequest(request: ClientRequest, options: ClientRequestArgs, ...rest: unknown[]): void {
      if (holding()) return;
      const org = poolOrgOf(options);
      const free = (this.freeSockets[this.getName(options)]?.length ?? 0) > 0;
      if (free || share.hasRoom(org)) return addRequest.call(this, request, options, ...rest);
      const withdraw = (options as WithdrawableRequestOptions).poolWithdraw;
      share.wait(org, request, () => !request.destroyed && withdraw?.() !== true, () => (holding() ? undefined : addRequest.call(this, request, options, ...rest)));
      // An idle socket of the org's own gives its room up; when the process holds its total, any org's.
      if (!idle.closeOne(org) && share.full) idle.closeOne();
    }

    override createConnection(options: ClientRequestArgs, callback?: (error: Error | null, stream: Duplex) => void): Duplex | null | undefined {
      const lookup = lookupFor(Number(options.port));
      let made: Duplex | null | undefined;
      let answered = false;
      const marked: ConnectionLookup = (hostname, lookupOptions, done) =>
        lookup(hostname, lookupOptions, (...answer) => {
          answered = true;
          if (made) lookedUp.add(made);
          done(...answer);
        });
      const socket = super.createConnection(withLookup(options, marked), callback);
      made = socket;
      if (answered && socket) lookedUp.add(socket);
      if (socket !== null && socket !== undefined) {
        const org = poolOrgOf(options);
        orgs.set(socket, org);
        const openedAt = share.opened(org);
        socket.once('close', () => {
          idle.taken(socket);
          // After the agent's own close handler (registered after this one), which may open a socket
          // for a request in the origin's queue: counted first, it keeps the total (else one over).
          queueMicrotask(() => share.closed(org, openedAt));
        });
      }
      return socket;
    }

    /** Node asks this when a request is done with a socket: false closes it instead of keeping it for reuse. */
    override keepSocketAlive(socket: Duplex): boolean {
      const org = orgs.get(socket) ?? '';
      if (!idle.hasRoom(org) || share.hasWaiting(org) || share.full || !(super.keepSocketAlive(socket) as unknown as boolean)) return false;
      idle.kept(socket, org);
      return true;
    }

    override reuseSocket(socket: Duplex, request: ClientRequest): void {
      idle.taken(socket);
      super.reuseSocket(socket, request);
    }
  };
}

/** How a request ends when the pools close: before it had a socket, or while it waited for the answer. */
export const SHUT_DOWN = {
  queued: 'Sluice is shutting down; the request was not sent',
  inFlight: 'Sluice shut down before the receiver answered',
} as const;

/** Takes the place of an agent's `createConnection` once closed, so a queued request never opens one. */
function refuseConnection(_options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): undefined {
  callback?.(new Error(SHUT_DOWN.queued), undefined as unknown as Duplex);
  return undefined;
}

export class OutboundConnections {
  readonly #agents: readonly [HttpAgent, HttpsAgent];
  readonly #share: OrgSocketShare;
  readonly #resolver: ReceiverResolver;
  /** Requests not yet settled, by their cancel: a queued one gets no error from Node when its agent is destroyed. */
  readonly #unsettled = new Map<() => void, () => boolean>();
  #closed = false;
  /** holdUnsent() was called: no request gets a socket any more. */
  #holding = false;

  /**
   * `targets`: which addresses new connections may reach; `selfPort`: the runtime's own port, which
   * no connection to this machine may use (webhook-address-policy.ts); `resolver`: how names are
   * looked up (receiver-lookup.ts; tests give it their DNS server); `idleSocketsPerOrg`: idle
   * keep-alive sockets one org may hold over all its receivers (idle-sockets.ts); `socketsPerOrg`:
   * sockets, busy or idle, one org may hold over all its receivers, `socketsTotal` every org
   * together (org-socket-share.ts).
   */
  constructor(
    readonly perReceiver: number = DEFAULT_WEBHOOK_CONNECTIONS,
    readonly targets: WebhookTargets = 'public',
    options: {
      readonly selfPort?: () => number;
      readonly resolver?: ReceiverResolver;
      readonly idleSocketsPerOrg?: number;
      readonly socketsPerOrg?: number;
      readonly socketsTotal?: number;
      /** How long a socket may sit idle before it closes (default IDLE_SOCKET_MS). */
      readonly idleSocketMs?: number;
    } = {},
  ) {
    // LIFO keeps the most recently used sockets busy and lets the others go idle and close.
    const agentOptions: AgentOptions = { keepAlive: true, scheduling: 'lifo', maxSockets: perReceiver, timeout: options.idleSocketMs ?? IDLE_SOCKET_MS };
    const resolver = options.resolver ?? new ReceiverResolver();
    this.#resolver = resolver;
    const selfPort = options.selfPort ?? (() => 0);
    const publicOnly = targets === 'public';
    const lookups = [connectionLookup(resolver, { publicOnly, refuseSelf: false }), connectionLookup(resolver, { publicOnly, refuseSelf: true })] as const;
    // The pools' names are checked where they connect.
    const lookupFor: LookupForPort = (port) => lookups[port === selfPort() ? 1 : 0];
    const idle = new OrgIdleSockets(options.idleSocketsPerOrg);
    const share = new OrgSocketShare(options.socketsPerOrg, options.socketsTotal);
    this.#share = share;
    const holding = (): boolean => this.#holding;
    this.#agents = [new (orgPooled(HttpAgent, lookupFor, idle, share, holding))(agentOptions), new (orgPooled(HttpsAgent, lookupFor, idle, share, holding))(agentOptions)];
  }

  /** The pool a POST to `url` on behalf of `orgId` goes through. */
  pool(url: URL, orgId: string): OutboundPool {
    const agent = this.#agents[url.protocol === 'https:' ? 1 : 0];
    return {
      requestOptions: { agent, poolOrg: orgId },
      untilClosed: (cancel, endAnswer) => {
        // Closed already: the request might sit in a queue that no socket will ever serve.
        if (this.#closed) {
          queueMicrotask(cancel);
          return () => undefined;
        }
        this.#unsettled.set(cancel, endAnswer);
        return () => this.#unsettled.delete(cancel);
      },
      stopping: () => this.#holding,
      // `agent.requests` holds only the pools that have requests waiting, and a new one is queued last.
      isQueued: (request) => this.#share.isWaiting(request) || Object.values(agent.requests).some((waiting) => waiting?.at(-1) === (request as unknown)),
      drop: (request) => {
        this.#share.forget(orgId, request);
        // Node's queue of the pool's requests waiting for a socket (not in its typings as mutable).
        const queues = agent.requests as Record<string, unknown[] | undefined>;
        for (const [name, waiting] of Object.entries(queues)) {
          const at = waiting?.indexOf(request) ?? -1;
          if (at === -1) continue;
          waiting!.splice(at, 1);
          if (waiting!.length === 0) delete queues[name];
        }
      },
    };
  }

  /** Sockets open (busy or idle) and requests waiting for one, over every org and receiver, and how many may be open. */
  stats(): { readonly open: number; readonly waiting: number; readonly limit: number } {
    const count = (pools: NodeJS.ReadOnlyDict<readonly unknown[]>): number => Object.values(pools).reduce((sum, list) => sum + (list?.length ?? 0), 0);
    let open = 0;
    let waiting = this.#share.waiting;
    for (const agent of this.#agents) {
      open += count(agent.sockets) + count(agent.freeSockets);
      waiting += count(agent.requests);
    }
    return { open, waiting, limit: this.#share.total };
  }

  /**
   * A stop began: nothing more is sent. Requests waiting for a socket keep waiting, and one made
   * from now on gets none, while those already sent go on, so that an answer that comes before the
   * run engine closes is recorded. (A socket an answer freed used to carry a queued request out
   * during the stop, whose answer no one recorded: sent again after the restart.) close() cuts off
   * what is held, after the engine has closed: the attempts stay open and go out after the next start.
   * Answered requests whose bodies are still coming end them now (an answer that comes later ends
   * its own at once): their answers settle while the engine records them. (Ended only at close(),
   * after the engine, a 2xx taken before the stop was dropped, and sent again after the restart.)
   */
  holdUnsent(): void {
    this.#holding = true;
    for (const endAnswer of [...this.#unsettled.values()]) endAnswer();
    for (const agent of this.#agents) for (const name of Object.keys(agent.requests)) delete (agent.requests as Record<string, unknown>)[name];
  }

  /** Closes every socket and opens no more: requests in flight or still queued fail with a network error. */
  close(): void {
    this.#closed = true;
    this.#resolver.close();
    for (const agent of this.#agents) agent.createConnection = refuseConnection;
    this.#share.clear();
    for (const cancel of [...this.#unsettled.keys()]) cancel();
    this.#unsettled.clear();
    for (const agent of this.#agents) {
      // Else every busy socket that closes hands its slot to the head of the queue again.
      for (const name of Object.keys(agent.requests)) delete (agent.requests as Record<string, unknown>)[name];
      agent.destroy();
    }
  }
}
