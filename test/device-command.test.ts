// `sluice device` against a real runtime: it connects with the device's token, sends each message,
// prints Sluice's answers one per line and exits 0 when all were acked; a nack, a refused token or
// a bad URL give a non-zero exit and say why.

import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { deviceCommand } from '../runtime/device-command.ts';
import { call, createOrg } from './helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from './helpers/runtime.ts';

const ORG = 'acct-device-cli';
let rt: TestRuntime;
let token: string;
let socketUrl: string;

before(async () => {
  rt = await startRuntime();
  const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'cli-1' } });
  assert.equal(created.status, 201, created.text);
  token = created.body.token;
  socketUrl = `${rt.url.replace('http', 'ws')}${created.body.device.socket_path}`;
});
after(() => rt.close());

/** Runs the command with `stdinText` as its stdin; answers the exit code and the printed lines. */
async function run(args: string[], stdinText = '', env: NodeJS.ProcessEnv = {}): Promise<{ code: number; lines: string[] }> {
  const stdout = new PassThrough();
  let printed = '';
  stdout.on('data', (chunk: Buffer) => (printed += chunk.toString('utf8')));
  const code = await deviceCommand(args, { stdin: Readable.from([stdinText]), stdout, env });
  return { code, lines: printed.trim().split('\n') };
}

test('--send messages are stored and acked, one answer line each; exit 0', async () => {
  const { code, lines } = await run([socketUrl, '--token', token, '--send', '{"id":"c-1","type":"door.opened"}', '--send', '{"id":"c-2","type":"door.closed","payload":{"by":"badge-7"}}']);
  assert.equal(code, 0, lines.join('\n'));
  const frames = lines.map((line) => JSON.parse(line) as { type: string; id?: string });
  assert.deepEqual(frames.map((f) => [f.type, f.id]), [['ready', undefined], ['ack', 'c-1'], ['ack', 'c-2']]);
});

test('stdin lines are messages too; a nack makes the exit 1', async () => {
  const { code, lines } = await run([socketUrl, '--token', token], '{"id":"c-3","type":"door.opened"}\n\n{"id":"c-4"}\n');
  assert.equal(code, 1);
  assert.equal(lines.length, 3, lines.join('\n'));
  // A nack is answered at once, an ack once the message is durable: answers come in either order.
  assert.ok(lines.some((line) => /"type":"ack","id":"c-3"/.test(line)), lines.join('\n'));
  assert.ok(lines.some((line) => /"type":"nack","id":"c-4".*"field":"type"/.test(line)), lines.join('\n'));
});

test('the token may come from SLUICE_DEVICE_TOKEN instead of --token (out of ps); --token wins', async () => {
  const fromEnv = await run([socketUrl, '--send', '{"id":"e-1","type":"door.opened"}'], '', { SLUICE_DEVICE_TOKEN: token });
  assert.equal(fromEnv.code, 0, fromEnv.lines.join('\n'));
  const flagWins = await run([socketUrl, '--token', 'sdt_wrong', '--send', '{"id":"e-2","type":"t"}'], '', { SLUICE_DEVICE_TOKEN: token });
  assert.match(flagWins.lines[0]!, /refused with 401/);
  // Read from a CRLF file: named, not a subprotocol error from deep inside the WebSocket library.
  await assert.rejects(run([socketUrl, '--send', '{"id":"e-3","type":"t"}'], '', { SLUICE_DEVICE_TOKEN: `${token}\r` }), /The device token holds U\+000D at position \d+ \(white space around it/);
});

test('a wrong token is refused with the reason printed; a bad URL or a missing token is a usage error', async () => {
  const refused = await run([socketUrl, '--token', 'sdt_wrong', '--send', '{"id":"x","type":"t"}']);
  assert.equal(refused.code, 1);
  assert.match(refused.lines[0]!, /refused with 401: .*unauthorized/);
  await assert.rejects(run(['http://example.test/devices/a/b', '--token', token]), /usage: sluice device/);
  await assert.rejects(run([socketUrl]), /A device token is required: --token, or SLUICE_DEVICE_TOKEN/);
});
