// A webhook step to an https receiver named by a host name: the connection resolves the name with
// its own lookup (receiver-lookup.ts through the pools' per-connection lookup) and still sends the
// name for TLS (SNI, without a trailing dot) and checks the certificate against it; a second
// attempt reuses the kept-alive connection. In a child process, which trusts the fixture's
// self-signed certificate (NODE_EXTRA_CA_CERTS is read at start); the certificate and key are for
// tests only.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..');
const FIXTURES = join(import.meta.dirname, 'fixtures');

test('an https receiver by name: verified against its name, sent its name in SNI, its connection kept alive', () => {
  const script = `
    import { createServer } from 'node:https';
    import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
    import { tmpdir } from 'node:os';
    import { join } from 'node:path';
    import { OutboundConnections } from './runtime/runs/outbound-connections.ts';
    import { ReceiverResolver } from './runtime/runs/receiver-lookup.ts';
    import { sendWebhook } from './runtime/runs/webhook-step.ts';
    const fixtures = ${JSON.stringify(FIXTURES)};
    const names = [];
    let connections = 0;
    const server = createServer({ key: readFileSync(join(fixtures, 'receiver-test.key')), cert: readFileSync(join(fixtures, 'receiver-test.crt')) }, (req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    });
    server.on('secureConnection', (socket) => { connections += 1; names.push(socket.servername); });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const hosts = join(mkdtempSync(join(tmpdir(), 'sluice-hosts-')), 'hosts');
    writeFileSync(hosts, '127.0.0.1 receiver.test other-name.test\\n');
    const pools = new OutboundConnections(4, 'any', { resolver: new ReceiverResolver({ hostsPath: hosts }) });
    const send = (host) => sendWebhook(
      { orgId: 'acct-tls', url: 'https://' + host + ':' + server.address().port + '/hook', headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:s', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now() },
      { selfPort: 1, connections: pools },
    );
    const outcomes = [await send('receiver.test'), await send('receiver.test'), await send('other-name.test'), await send('receiver.test.')];
    process.stdout.write(JSON.stringify({ outcomes: outcomes.map((o) => (o.ok ? 'ok' : o.error.code + ': ' + o.error.message)), names, connections }));
    pools.close();
    server.close();
  `;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_EXTRA_CA_CERTS: join(FIXTURES, 'receiver-test.crt') },
  });
  assert.equal(child.status, 0, child.stderr);
  const { outcomes, names, connections } = JSON.parse(child.stdout) as { outcomes: string[]; names: string[]; connections: number };
  assert.deepEqual([...outcomes.slice(0, 2), outcomes[3]], ['ok', 'ok', 'ok']);
  assert.match(outcomes[2]!, /^webhook_tls_error: Nothing was sent: the receiver's TLS certificate was refused \(ERR_TLS_CERT_ALTNAME_INVALID: .*altnames/, 'a name the certificate is not for fails its check');
  // The second attempt reused the first connection; the third never completed its handshake; the
  // fourth, to the name written fully qualified, named it in SNI without its trailing dot.
  assert.deepEqual(names, ['receiver.test', 'receiver.test']);
  assert.equal(connections, 2);
});
