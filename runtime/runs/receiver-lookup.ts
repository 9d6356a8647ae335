// How webhook steps find a receiver's addresses: the hosts file, then DNS through c-ares (the
// servers /etc/resolv.conf names, with its search domains: search-domains.ts), never Node's
// dns.lookup. That one is the system's getaddrinfo, run on libuv's thread pool, at most two at a
// time with its default four threads: two lookups of names whose nameserver never answers (any
// tenant can own such a domain) held every other org's new connections, and their steps failed
// with webhook_dns_timeout against healthy receivers. A c-ares query waiting for an answer costs a
// timer, not a thread. (Names the system resolves some other way, such as mDNS `.local` names,
// are not found.)

import { Resolver } from 'node:dns';
import { isIP } from 'node:net';
import { HostsFile, type HostAddress } from './hosts-file.ts';
import { ResolvConf, type SearchEnv } from './search-domains.ts';

/** c-ares per query: this long per try, this many tries per server; the step's own deadline may end the wait sooner. */
const QUERY_TIMEOUT_MS = 2500;
const QUERY_TRIES = 2;
/** How long the other family's answer is waited for once one family has addresses (RFC 8305 suggests 50 ms). */
const RESOLUTION_DELAY_MS = 250;

/** Answers that mean the name has no such address (as opposed to no answer at all). */
const NO_SUCH_ADDRESS = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME']);

/** RFC 6761: `localhost` and names under it are this machine, hosts file or not. */
const isLocalhost = (hostname: string): boolean => /(^|\.)localhost\.?$/i.test(hostname);
const LOCALHOST: readonly HostAddress[] = [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];

export interface ReceiverResolverOptions {
  /** Default /etc/hosts. */
  readonly hostsPath?: string;
  /** DNS servers (`host` or `host:port`); default those of /etc/resolv.conf. */
  readonly servers?: readonly string[];
  /** Per try of a query; default QUERY_TIMEOUT_MS. */
  readonly queryTimeoutMs?: number;
  /** Where the search domains and ndots are read (search-domains.ts); default /etc/resolv.conf. */
  readonly resolvConfPath?: string;
  /** LOCALDOMAIN and RES_OPTIONS (config.ts reads them from the process); default none. */
  readonly env?: SearchEnv;
}

/** c-ares's code for a query no server answered within its tries. */
const NO_ANSWER = 'ETIMEOUT';

/**
 * A lookup that found no address: ENOTFOUND (DNS says the name has none) or EAI_AGAIN (no answer
 * now). `unanswered`: every query timed out, as against a server's failure answer (SERVFAIL,
 * REFUSED); the step reports that as the lookup's timeout, as one its own deadline cut short.
 */
export class ReceiverLookupError extends Error implements NodeJS.ErrnoException {
  override readonly name = 'ReceiverLookupError';
  readonly syscall = 'queryA';
  constructor(
    readonly code: 'ENOTFOUND' | 'EAI_AGAIN',
    hostname: string,
    readonly unanswered: boolean,
    cause?: NodeJS.ErrnoException,
  ) {
    const says =
      code === 'ENOTFOUND'
        ? 'has no address'
        : unanswered
          ? 'could not be resolved: its nameservers did not answer'
          : `could not be resolved now (DNS: ${cause?.code ?? 'no answer'})`;
    super(`${hostname} ${says}`, { cause });
  }
}

export class ReceiverResolver {
  readonly #hosts: HostsFile;
  readonly #search: ResolvConf;
  readonly #dns: Resolver;

  constructor(options: ReceiverResolverOptions = {}) {
    this.#hosts = new HostsFile(options.hostsPath);
    this.#search = new ResolvConf(options.resolvConfPath, options.env);
    this.#dns = new Resolver({ timeout: options.queryTimeoutMs ?? QUERY_TIMEOUT_MS, tries: QUERY_TRIES });
    if (options.servers !== undefined) this.#dns.setServers([...options.servers]);
  }

  /**
   * Every address of `hostname` of the family asked for (0: both, IPv4 first): from the hosts file,
   * else from DNS for the first of its candidate names (search-domains.ts) that has one. Rejects
   * (ReceiverLookupError) with ENOTFOUND when none has, EAI_AGAIN when DNS did not answer for one
   * (both retryable for a step).
   */
  async addresses(hostname: string, family: 0 | 4 | 6 = 0): Promise<HostAddress[]> {
    const wanted = (entry: HostAddress): boolean => family === 0 || entry.family === family;
    const literal = isIP(hostname);
    if (literal === 4 || literal === 6) return [{ address: hostname, family: literal } satisfies HostAddress].filter(wanted);
    const listed = this.#hosts.addresses(hostname) ?? (isLocalhost(hostname) ? LOCALHOST : undefined);
    if (listed !== undefined) {
      const matching = listed.filter(wanted);
      if (matching.length > 0) return matching;
      throw new ReceiverLookupError('ENOTFOUND', hostname, false);
    }
    const failures: NodeJS.ErrnoException[] = [];
    for (const name of this.#search.candidates(hostname)) {
      const answer = await this.#resolve(name, family);
      if (answer.found.length > 0) return answer.found;
      failures.push(...answer.failures);
    }
    const nothingThere = failures.every((failure) => NO_SUCH_ADDRESS.has(failure.code ?? ''));
    if (nothingThere) throw new ReceiverLookupError('ENOTFOUND', hostname, false, failures[0]);
    // A name with no such address under one search domain and silence under another: silence is what held the step.
    const unanswered = failures.every((failure) => failure.code === NO_ANSWER || NO_SUCH_ADDRESS.has(failure.code ?? ''));
    throw new ReceiverLookupError('EAI_AGAIN', hostname, unanswered, failures.find((failure) => !NO_SUCH_ADDRESS.has(failure.code ?? '')));
  }

  /**
   * A and AAAA for `name` at once; once one has addresses the other gets RESOLUTION_DELAY_MS more
   * (a nameserver that answers A but never AAAA would otherwise hold the connection for its timeouts).
   */
  #resolve(name: string, family: 0 | 4 | 6): Promise<{ found: HostAddress[]; failures: NodeJS.ErrnoException[] }> {
    const families = ([4, 6] as const).filter((each) => family === 0 || family === each);
    const outcomes: Array<HostAddress[] | NodeJS.ErrnoException | undefined> = families.map(() => undefined);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve({
          found: outcomes.flatMap((outcome) => (Array.isArray(outcome) ? outcome : [])),
          failures: outcomes.flatMap((outcome) => (outcome instanceof Error ? [outcome] : [])),
        });
      };
      families.forEach((each, i) => {
        const settle = (outcome: HostAddress[] | NodeJS.ErrnoException): void => {
          outcomes[i] = outcome;
          if (outcomes.every((known) => known !== undefined)) finish();
          else if (timer === undefined && Array.isArray(outcome) && outcome.length > 0) timer = setTimeout(finish, RESOLUTION_DELAY_MS);
        };
        this.#query(name, each).then(settle, settle);
      });
    });
  }

  /** Ends the queries still waiting for an answer (ECANCELLED): nothing is left to hold the process. */
  close(): void {
    this.#dns.cancel();
  }

  #query(hostname: string, family: 4 | 6): Promise<HostAddress[]> {
    return new Promise((resolve, reject) => {
      const done = (error: NodeJS.ErrnoException | null, addresses: string[]): void => {
        if (error === null) resolve(addresses.map((address) => ({ address, family })));
        else reject(error);
      };
      if (family === 4) this.#dns.resolve4(hostname, done);
      else this.#dns.resolve6(hostname, done);
    });
  }
}
