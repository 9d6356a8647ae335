// How webhook steps look up receivers: the hosts file first, then DNS through c-ares, off libuv's
// thread pool. Lookups a nameserver never answers hold no thread (the system resolver's lookups
// ran on at most two, so two such names held every org's new connections), and end as EAI_AGAIN;
// a name DNS says has no address is ENOTFOUND. Against a DNS server of the test's own.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, mock, test } from 'node:test';
import { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { candidateNames, parseSearchRules } from '../../runtime/runs/search-domains.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

let dns: TestDnsServer;
let dir: string;
let resolver: ReceiverResolver;

before(async () => {
  dns = await startDnsServer({
    'receiver.test': '203.0.113.10', 'gone.test': 'nxdomain', 'broken.test': 'servfail', 'hang.evil.test': 'silent', 'hang2.evil.test': 'silent',
    'billing.corp.test': '203.0.113.20', 'api.example.test': '203.0.113.30', 'api.example.test.corp.test': '203.0.113.31',
    'no-aaaa.test': { a: '203.0.113.40', aaaa: 'silent' },
  });
  dir = mkdtempSync(join(tmpdir(), 'sluice-hosts-'));
  writeFileSync(join(dir, 'hosts'), '# comment\n127.0.0.1\tlocalhost\n198.51.100.7 listed.test  alias.test # trailing comment\n2001:db8::7 listed.test\nnot-an-address bogus.test\n');
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 192.0.2.53\nsearch corp.test\n');
  resolver = new ReceiverResolver({ hostsPath: join(dir, 'hosts'), resolvConfPath: join(dir, 'resolv.conf'), env: {}, servers: [dns.address], queryTimeoutMs: 300 });
});
after(async () => {
  resolver.close();
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

test('DNS answers the rest: an address, ENOTFOUND for a name with none, EAI_AGAIN for silence (unanswered) or a failure answer', async () => {
  assert.deepEqual(await resolver.addresses('receiver.test'), [{ address: '203.0.113.10', family: 4 }]);
  await assert.rejects(resolver.addresses('gone.test'), { code: 'ENOTFOUND' });
  await assert.rejects(resolver.addresses('nobody-knows.test'), { code: 'ENOTFOUND' }, 'an empty answer');
  await assert.rejects(resolver.addresses('hang.evil.test'), { name: 'ReceiverLookupError', code: 'EAI_AGAIN', unanswered: true, message: 'hang.evil.test could not be resolved: its nameservers did not answer' });
  // A nameserver's failure answer is not silence: it says which.
  await assert.rejects(resolver.addresses('broken.test'), { name: 'ReceiverLookupError', code: 'EAI_AGAIN', unanswered: false, message: 'broken.test could not be resolved now (DNS: ESERVFAIL)' });
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

test("resolv.conf's search rules: the last search or domain line, LOCALDOMAIN over both, ndots from options and RES_OPTIONS", () => {
  assert.deepEqual(parseSearchRules('domain old.test\nsearch a.test .b.test. # comment\noptions ndots:5 timeout:2\n'), { search: ['a.test', 'b.test'], ndots: 5 });
  assert.deepEqual(parseSearchRules('search a.test\ndomain d.test\n'), { search: ['d.test'], ndots: 1 });
  assert.deepEqual(parseSearchRules('search a.test\n', { LOCALDOMAIN: 'x.test y.test', RES_OPTIONS: 'ndots:2' }), { search: ['x.test', 'y.test'], ndots: 2 });
  assert.deepEqual(parseSearchRules(''), { search: [], ndots: 1 });
  // Kubernetes: short names under the search domains first; a name with enough dots as written first; a trailing dot as written only.
  const kube = { search: ['ns.svc.cluster.local', 'svc.cluster.local'], ndots: 5 };
  assert.deepEqual(candidateNames('billing', kube), ['billing.ns.svc.cluster.local', 'billing.svc.cluster.local', 'billing']);
  assert.deepEqual(candidateNames('hooks.example.com', { search: ['corp.test'], ndots: 1 }), ['hooks.example.com', 'hooks.example.com.corp.test']);
  assert.deepEqual(candidateNames('hooks.example.com.', kube), ['hooks.example.com']);
});

test('a short name resolves under a search domain; a dotted name as written first; a trailing dot as written only', async () => {
  assert.deepEqual(await resolver.addresses('billing'), [{ address: '203.0.113.20', family: 4 }]);
  assert.equal(dns.queries.get('billing'), undefined, 'not asked as written once the search domain answered');
  assert.deepEqual(await resolver.addresses('api.example.test'), [{ address: '203.0.113.30', family: 4 }], 'as written, before the search domain');
  await assert.rejects(resolver.addresses('billing.'), { code: 'ENOTFOUND' });
  assert.equal(dns.queries.get('billing.corp.test'), 2, 'the trailing dot asked no search domain (one A and one AAAA query from the first lookup)');
});

test('a nameserver that answers A but never AAAA holds the connection a moment (the resolution delay), not for its timeouts', async () => {
  const slow = new ReceiverResolver({ hostsPath: join(dir, 'hosts'), resolvConfPath: join(dir, 'resolv.conf'), env: {}, servers: [dns.address], queryTimeoutMs: 60_000 });
  // Only the resolution delay's timer is mocked: c-ares keeps its own clock, so the AAAA query stays unanswered.
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    let answer: unknown;
    void slow.addresses('no-aaaa.test').then((addresses) => (answer = addresses));
    for (let turn = 0; turn < 2000 && answer === undefined; turn++) {
      await new Promise((resolve) => setImmediate(resolve));
      mock.timers.tick(50);
    }
    assert.deepEqual(answer, [{ address: '203.0.113.40', family: 4 }]);
  } finally {
    mock.timers.reset();
    slow.close();
  }
});
