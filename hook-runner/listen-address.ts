// The runner's listen address: `host:port` (IPv6 as `[::1]:port`, port 0 = any free port) or
// `unix:/path`. Parsing, the gRPC bind target, and reclaiming a stale unix socket left by a crash.
import { lstatSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { RunnerConfigError } from './runner-error.ts';

export type ListenAddress =
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number }
  | { readonly kind: 'unix'; readonly path: string };

export const DEFAULT_LISTEN = '127.0.0.1:7878';

export function parseListenAddress(text: string): ListenAddress {
  if (text.startsWith('unix:')) {
    const path = text.slice('unix:'.length).replace(/^\/\/(?=\/)/, '');
    if (path.length === 0) throw new RunnerConfigError(`--listen ${text}: a unix socket path is required (unix:/path/to.sock).`);
    return { kind: 'unix', path: resolve(path) };
  }
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):([0-9]{1,5})$/.exec(text);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (match === null || host === undefined || !Number.isInteger(port) || port > 65535) {
    throw new RunnerConfigError(`--listen ${text}: expected host:port (e.g. 127.0.0.1:7878, [::1]:0) or unix:/path.`);
  }
  return { kind: 'tcp', host, port };
}

const formatHost = (host: string): string => (host.includes(':') ? `[${host}]` : host);

/** The address as gRPC writes it, with the port actually bound (meaningful for port 0). */
export function formatAddress(address: ListenAddress, boundPort?: number): string {
  if (address.kind === 'unix') return `unix:${address.path}`;
  return `${formatHost(address.host)}:${boundPort ?? address.port}`;
}

export const isLoopback = (address: ListenAddress): boolean =>
  address.kind === 'unix' || address.host === 'localhost' || address.host === '::1' || address.host.startsWith('127.');

/**
 * A unix socket file outlives a SIGKILLed runner and would make bind fail. Remove it only when
 * nothing accepts connections on it; a live socket means another runner is using the path.
 */
export async function reclaimStaleSocket(address: ListenAddress): Promise<void> {
  if (address.kind !== 'unix') return;
  try {
    if (!lstatSync(address.path).isSocket()) throw new RunnerConfigError(`${address.path} exists and is not a socket.`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  const alive = await new Promise<boolean>((done) => {
    const probe = connect(address.path);
    probe.once('connect', () => { probe.destroy(); done(true); });
    probe.once('error', () => done(false));
  });
  if (alive) throw new RunnerConfigError(`${address.path} is in use by another process.`);
  unlinkSync(address.path);
}
