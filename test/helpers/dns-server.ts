// A DNS server on a local UDP port for tests: answers A queries for the names it is given, NXDOMAIN
// for names it marks missing, SERVFAIL for names it marks failing, nothing at all for names it marks silent (as a tenant's own
// nameserver may) or for their AAAA only, an answer held until a promise settles, and an empty
// answer for anything else (AAAA included). Counts the queries.

import { createSocket, type Socket } from 'node:dgram';

/**
 * An IPv4 address (A; AAAA gets an empty answer), NXDOMAIN, SERVFAIL, no answer at all, an address whose
 * AAAA query goes unanswered, or an address (and AAAA's empty answer) sent only once `until` settles.
 */
export type DnsAnswer = string | 'nxdomain' | 'servfail' | 'silent' | { readonly a: string; readonly aaaa: 'silent' } | { readonly a: string; readonly until: Promise<void> };

export interface TestDnsServer {
  /** `127.0.0.1:<port>`, for a resolver's servers. */
  readonly address: string;
  /** Queries seen per name (lower case). */
  readonly queries: Map<string, number>;
  close(): Promise<void>;
}

/** The question's name (labels read up to the zero byte after the 12-byte header) and where the question ends. */
function question(packet: Buffer): { name: string; end: number; type: number } | undefined {
  const labels: string[] = [];
  let at = 12;
  while (at < packet.length && packet[at] !== 0) {
    const length = packet[at]!;
    labels.push(packet.subarray(at + 1, at + 1 + length).toString('latin1'));
    at += 1 + length;
  }
  if (at + 5 > packet.length) return undefined;
  return { name: labels.join('.').toLowerCase(), end: at + 5, type: packet.readUInt16BE(at + 1) };
}

function reply(query: Buffer, end: number, rcode: number, ipv4?: string): Buffer {
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  header.writeUInt16BE(0x8180 | rcode, 2); // response, recursion desired and available
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(ipv4 === undefined ? 0 : 1, 6);
  const parts = [header, query.subarray(12, end)];
  if (ipv4 !== undefined) {
    const answer = Buffer.alloc(16);
    answer.writeUInt16BE(0xc00c, 0); // the question's name
    answer.writeUInt16BE(1, 2); // A
    answer.writeUInt16BE(1, 4); // IN
    answer.writeUInt32BE(60, 6);
    answer.writeUInt16BE(4, 10);
    ipv4.split('.').forEach((octet, i) => answer.writeUInt8(Number(octet), 12 + i));
    parts.push(answer);
  }
  return Buffer.concat(parts);
}

export async function startDnsServer(names: Readonly<Record<string, DnsAnswer>>): Promise<TestDnsServer> {
  const socket: Socket = createSocket('udp4');
  const queries = new Map<string, number>();
  socket.on('message', (packet, from) => {
    const asked = question(packet);
    if (asked === undefined) return;
    queries.set(asked.name, (queries.get(asked.name) ?? 0) + 1);
    const given = names[asked.name];
    if (given === 'silent' || (typeof given === 'object' && 'aaaa' in given && asked.type === 28)) return;
    const answer = typeof given === 'object' ? given.a : given;
    const out = answer === 'nxdomain' ? reply(packet, asked.end, 3) : answer === 'servfail' ? reply(packet, asked.end, 2) : reply(packet, asked.end, 0, answer !== undefined && asked.type === 1 ? answer : undefined);
    const send = (): void => socket.send(out, from.port, from.address);
    if (typeof given === 'object' && 'until' in given) void given.until.then(send);
    else send();
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
