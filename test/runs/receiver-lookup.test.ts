// How webhook steps look up receivers: the hosts file first, then DNS through c-ares, off libuv's
// thread pool. Lookups a nameserver never answers hold no thread (the system resolver's lookups
// ran on at most two, so two such names held every org's new connections), and end as EAI_AGAIN;
// a name DNS says has no address is ENOTFOUND. Against a DNS server of the test's own.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

let dns: TestDnsServer;
let dir: string;
let resolver: ReceiverResolver;

before(async () => {
  dns = await startDnsServer({ 'receiver.test': '203.0.113.10', 'gone.test': 'nxdomain', 'hang.evil.test': 'silent', 'hang2.evil.test': 'silent' });
  dir = mkdtempSync(join(tmpdir(), 'sluice-hosts-'));
  writeFileSync(join(dir, 'hosts'), '# comment\n127.0.0.1\tlocalhost\n198.51.100.7 listed.test  alias.test # trailing comment\n2001:db8::7 listed.test\nnot-an-address bogus.test\n');
  resolver = new ReceiverResolver({ hostsPath: join(dir, 'hosts'), servers: [dns.address], queryTimeoutMs: 300 });
});
after(async () => {
  await dns.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the hosts file answers first, every address of a name in file order, by family; DNS is not asked', async () => {
  assert.deepEqual(await resolver.addresses('LISTED.test'), [{ address: '198.51.100.7', family: 4 }, { address: '2001:db8::7', family: 6 }]);
  assert.deepEqual(await resolver.addresses('alias.test', 4), [{ address: '198.51.100.7', family: 4 }]);
  assert.deepEqual(await resolver.addresses('listed.test', 6), [{ address: '2001:db8::7', family: 6 }]);
  await assert.rejects(resolver.addresses('alias.test', 6), { code: 'ENOTFOUND' });
  assert.equal(dns.queries.get('listed.test'), undefined);
  assert.deepEqual(await resolver.addresses('localhost', 4), [{ address: '127.0.0.1', family: 4 }]);
  assert.deepEqual(await resolver.addresses('api.localhost'), [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }], 'RFC 6761, listed or not');
  assert.deepEqual(await resolver.addresses('203.0.113.9'), [{ address: '203.0.113.9', family: 4 }]);
});

test('DNS answers the rest: an address, ENOTFOUND for a name with none, EAI_AGAIN for silence', async () => {
  assert.deepEqual(await resolver.addresses('receiver.test'), [{ address: '203.0.113.10', family: 4 }]);
  await assert.rejects(resolver.addresses('gone.test'), { code: 'ENOTFOUND' });
  await assert.rejects(resolver.addresses('nobody-knows.test'), { code: 'ENOTFOUND' }, 'an empty answer');
  await assert.rejects(resolver.addresses('hang.evil.test'), (error: NodeJS.ErrnoException) => error.code === 'EAI_AGAIN' && /could not be resolved now/.test(error.message));
});

test('lookups no nameserver answers hold no thread: the thread pool and other names are served meanwhile', async () => {
  // Twice the pool's threads: as getaddrinfo calls, these would have held all of it.
  const hanging = Array.from({ length: 8 }, (_, i) => resolver.addresses(i % 2 === 0 ? 'hang.evil.test' : 'hang2.evil.test').then(() => 'resolved', () => 'failed'));
  let settled = 0;
  for (const lookup of hanging) void lookup.then(() => (settled += 1));
  // Work of the thread pool (a file read) and a lookup the nameserver answers both finish first.
  assert.equal((await readFile(join(dir, 'hosts'), 'utf8')).length, readFileSync(join(dir, 'hosts'), 'utf8').length);
  assert.deepEqual(await resolver.addresses('receiver.test'), [{ address: '203.0.113.10', family: 4 }]);
  assert.equal(settled, 0, 'the hanging lookups were still waiting');
  assert.deepEqual(await Promise.all(hanging), Array(8).fill('failed'));
});
