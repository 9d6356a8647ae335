// Which addresses webhook steps may connect to. `public` (the default of `sluice serve`): only
// public ones, since a tenant's URL must not reach the runtime's own network (loopback, private
// ranges, link-local with the cloud metadata address, shared CGNAT space, multicast, reserved and
// documentation ranges) and read what answers there: the first 4 KiB become the step result.
// `any` (the default of `sluice dev`) also allows local receivers. Neither reaches the runtime's
// own port on this machine. Names are checked in the lookup the connection itself uses, so a name
// that resolves elsewhere a moment later gains nothing.

import type { LookupAddress, LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { ReceiverResolver } from './receiver-lookup.ts';

export type WebhookTargets = 'public' | 'any';
export const WEBHOOK_TARGETS: readonly WebhookTargets[] = ['public', 'any'];

const NOT_PUBLIC = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NOT_PUBLIC.addSubnet(network, prefix, 'ipv4');
// ::/96 holds the unspecified and loopback addresses and the deprecated IPv4-compatible ones
// (::a9fe:a9fe); ::ffff:0:0:0/96 is SIIT's IPv4-translated form; 6to4 (2002::/16) and Teredo
// (2001::/32) embed an IPv4 address too and are deprecated (RFC 7526, nothing public needs them).
for (const [network, prefix] of [
  ['::', 96], ['::ffff:0:0:0', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 32], ['2001:db8::', 32], ['2002::', 16], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
] as const) NOT_PUBLIC.addSubnet(network, prefix, 'ipv6');

/**
 * The IPv4 address an IPv6 address embeds after `prefix` (`::ffff:` mapped, `64:ff9b::` NAT64), in
 * either spelling (`::ffff:7f00:1`, as URL writes it, or `::ffff:127.0.0.1`); undefined otherwise.
 */
export function embeddedIPv4(address: string, prefix: '::ffff:' | '64:ff9b::'): string | undefined {
  const rest = address.toLowerCase().startsWith(prefix) ? address.slice(prefix.length) : undefined;
  if (rest === undefined) return undefined;
  if (/^\d+\.\d+\.\d+\.\d+$/.test(rest)) return rest;
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(rest);
  if (hex === null) return undefined;
  const [high, low] = [parseInt(hex[1] ?? '0', 16), parseInt(hex[2] ?? '0', 16)];
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

/** Whether `address` (an IP literal, brackets removed) is on the public internet. IPv4-mapped forms count as their IPv4 address. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 4) return !NOT_PUBLIC.check(address, 'ipv4');
  const embedded = embeddedIPv4(address, '64:ff9b::');
  if (embedded !== undefined) return isPublicAddress(embedded);
  return !NOT_PUBLIC.check(address, 'ipv6');
}

/** A webhook URL that leads to an address the policy does not allow: never retried. */
export class ForbiddenTargetError extends Error {
  override readonly name = 'ForbiddenTargetError';

  /**
   * The message names the host, not the address it resolved to: a tenant learns no internal
   * address this way. (That an internal name exists it can tell from a name that does not resolve
   * at all, a retryable network error: a transient DNS failure must not fail runs for good.)
   */
  constructor(host: string) {
    super(`${host} does not resolve to a public address (--webhook-targets public)`);
  }
}

/** A URL names this runtime's own listener: never sent (a loop, or a tenant calling the API as Sluice). */
export class SelfTargetError extends Error {
  override readonly name = 'SelfTargetError';
}

/**
 * Whether an address reaches this machine: loopback, the unspecified address, or one of its own
 * interfaces (a runtime listening on 0.0.0.0 answers on all of them). Read per check: interfaces change.
 */
export function isOwnAddress(address: string): boolean {
  const lower = address.toLowerCase();
  // An IPv4-mapped IPv6 address counts as its IPv4 address.
  const plain = embeddedIPv4(lower, '::ffff:') ?? lower;
  if (plain.startsWith('127.') || plain === '::1' || plain === '0.0.0.0' || plain === '::') return true;
  return Object.values(networkInterfaces()).some((entries) => entries?.some((entry) => entry.address.toLowerCase() === plain));
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
export type ConnectionLookup = (hostname: string, options: LookupOptions, callback: LookupCallback) => void;

/** What a connection's lookup refuses: addresses that are not public (`public` policy), and this runtime (a connection to its port). */
export interface LookupRules {
  readonly publicOnly: boolean;
  readonly refuseSelf: boolean;
}

const familyOf = (family: LookupOptions['family']): 0 | 4 | 6 => (family === 4 || family === 'IPv4' ? 4 : family === 6 || family === 'IPv6' ? 6 : 0);

/**
 * The `lookup` of one connection: resolves the name with `resolver` (off libuv's thread pool,
 * receiver-lookup.ts) and checks every address it gets against `rules`, so the addresses checked
 * are the ones connected to.
 */
export function connectionLookup(resolver: ReceiverResolver, rules: LookupRules): ConnectionLookup {
  return (hostname, options, callback) => {
    resolver.addresses(hostname, familyOf(options.family)).then(
      (addresses) => {
        if (rules.refuseSelf && addresses.some((entry) => isOwnAddress(entry.address))) {
          callback(new SelfTargetError(`${hostname} resolves to this Sluice runtime`), []);
        } else if (rules.publicOnly && addresses.some((entry) => !isPublicAddress(entry.address))) {
          callback(new ForbiddenTargetError(hostname), []);
        } else if (options.all === true) {
          callback(null, addresses);
        } else {
          callback(null, addresses[0]?.address ?? '', addresses[0]?.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, []),
    );
  };
}
