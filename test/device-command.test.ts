// `sluice device` against a real runtime: it connects with the device's token, sends each message
// (never more unanswered than Sluice's per-socket cap; a retryable nack sent again after the wait
// it names), prints Sluice's answers one per line and exits 0 when all were acked; a nack, a
// refused or empty token or a bad URL give a non-zero exit and say why.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { WebSocketServer } from 'ws';
import { ManualClock } from '../runtime/clock.ts';
import { deviceCommand } from '../runtime/device-command.ts';
import { leadingFrameId, MAX_MESSAGES_IN_FLIGHT } from '../runtime/triggers/device-frame.ts';
import { DEVICE_PROTOCOL } from '../runtime/triggers/device-upgrade.ts';
import type { Sleep } from '../kits/client/retry.ts';
import { connectDevice } from './helpers/device-client.ts';
import { call, createOrg } from './helpers/http.ts';
import { capturedOutput } from './helpers/captured-output.ts';
import { startRefusingUpgradeServer } from './helpers/refusing-upgrade-server.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from './helpers/runtime.ts';

const ORG = 'acct-device-cli';
/** Moves only when a test moves it: the starter quota refills only as the command waits. */
const clock = new ManualClock(Date.UTC(2026, 10, 30, 12, 0, 0));
let rt: TestRuntime;
let token: string;
let socketUrl: string;

before(async () => {
  rt = await startRuntime({ clock });
  const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'cli-1' } });
  assert.equal(created.status, 201, created.text);
  token = created.body.token;
  socketUrl = `${rt.url.replace('http', 'ws')}${created.body.device.socket_path}`;
});
after(() => rt.close());

/** Runs the command with `stdinText` as its stdin; answers the exit code and the lines printed to stdout and stderr. */
async function run(args: string[], stdinText = '', env: NodeJS.ProcessEnv = {}, sleep?: Sleep): Promise<{ code: number; lines: string[]; notices: string[] }> {
  const output = capturedOutput();
  const code = await deviceCommand(args, { stdin: Readable.from([stdinText]), stdout: output.stdout, stderr: output.stderr, env, ...(sleep === undefined ? {} : { sleep }) });
  return { code, lines: output.out().trim().split('\n'), notices: output.err() === '' ? [] : output.err().trim().split('\n') };
}

/** `count` stdin lines, each a message with id `<prefix>-<n>`. */
const messageLines = (prefix: string, count: number): string =>
  Array.from({ length: count }, (_, i) => `{"id":"${prefix}-${i + 1}","type":"bulk.ev"}\n`).join('');

/** The ids of the acks among printed lines, sorted; and how many lines were anything but ready or an ack. */
function acksOf(lines: string[]): { acked: string[]; other: string[] } {
  const frames = lines.map((line) => JSON.parse(line) as { type: string; id?: string; duplicate?: boolean });
  return {
    acked: frames.filter((f) => f.type === 'ack' && f.duplicate === false).map((f) => f.id!).sort(),
    other: lines.filter((_, i) => frames[i]!.type !== 'ready' && frames[i]!.type !== 'ack'),
  };
}

const idsOf = (prefix: string, count: number): string[] => Array.from({ length: count }, (_, i) => `${prefix}-${i + 1}`).sort();

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
  assert.match(flagWins.notices[0]!, /^sluice device: refused with 401/);
  // Read from a CRLF file: named, not a subprotocol error from deep inside the WebSocket library.
  await assert.rejects(run([socketUrl, '--send', '{"id":"e-3","type":"t"}'], '', { SLUICE_DEVICE_TOKEN: `${token}\r` }), /The device token holds U\+000D at position \d+ \(white space around it/);
});

test('a wrong token is refused with the reason on stderr (stdout keeps to answers); a bad URL or a missing token is a usage error', async () => {
  const refused = await run([socketUrl, '--token', 'sdt_wrong', '--send', '{"id":"x","type":"t"}']);
  assert.equal(refused.code, 1);
  assert.match(refused.notices[0]!, /^sluice device: refused with 401: .*unauthorized/);
  assert.deepEqual(refused.lines, [''], 'nothing on stdout');
  // The API's URL instead of the socket's: said so, not only the usage line.
  await assert.rejects(run(['http://example.test/devices/a/b', '--token', token]), /The device socket URL starts with ws:\/\/ or wss:\/\/ \(got "http:\/\/example.test\/devices\/a\/b"\)\. usage: sluice device/);
  await assert.rejects(run(['https://ops:pa55word@example.test/devices/a/b?token=sdt_x', '--token', token]), (error: Error) => {
    assert.match(error.message, /\(got "https:\/\/ops:\*\*\*@example.test\/devices\/a\/b\?\*\*\*"\)/);
    assert.doesNotMatch(error.message, /pa55word|sdt_x/);
    return true;
  });
  await assert.rejects(run([]), /^InputError: usage: sluice device/);
  await assert.rejects(run([socketUrl]), /A device token is required: --token, or SLUICE_DEVICE_TOKEN/);
});

test('a socket it cannot reach is said on stderr with the address and the reason; exit 1', async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const url = `ws://127.0.0.1:${port}/devices/${ORG}/cli-1`;
  const unreachable = await run([url, '--token', token, '--send', '{"id":"u-1","type":"t"}']);
  assert.equal(unreachable.code, 1);
  assert.deepEqual(unreachable.notices, [`sluice device: could not reach ${url} (connect ECONNREFUSED 127.0.0.1:${port})`]);
  assert.deepEqual(unreachable.lines, [''], 'nothing on stdout');
  // A password or a query in the URL is not printed back (a token may sit there).
  const withSecrets = await run([`ws://ops:pa55word@127.0.0.1:${port}/devices/${ORG}/cli-1?token=sdt_secret`, '--token', token, '--send', '{"id":"u-2","type":"t"}']);
  assert.equal(withSecrets.code, 1);
  assert.deepEqual(withSecrets.notices, [`sluice device: could not reach ws://ops:***@127.0.0.1:${port}/devices/${ORG}/cli-1?*** (connect ECONNREFUSED 127.0.0.1:${port})`]);
});

test('more stdin lines than a socket may have unanswered are paced, not nacked: 300 lines, 300 acks, exit 0', async () => {
  assert.ok(300 > 4 * MAX_MESSAGES_IN_FLIGHT, 'well past the cap');
  const { code, lines, notices } = await run([socketUrl, '--token', token], messageLines('bulk', 300));
  assert.deepEqual(acksOf(lines), { acked: idsOf('bulk', 300), other: [] }, 'each message acked once, no nack printed');
  assert.deepEqual(notices, [], 'none was even refused for too many in flight: the command never had more unanswered than the cap');
  assert.equal(code, 0);
});

test("a starter org's quota nacks are sent again after the wait Sluice names, until acked", async () => {
  const org = 'acct-device-cli-starter';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'starter');
  const created = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'till' } });
  assert.equal(created.status, 201, created.text);
  const url = `${rt.url.replace('http', 'ws')}${created.body.device.socket_path}`;
  // The starter quota is 100 events a second with one second of burst: 130 messages at one
  // instant overrun it by 30. Waiting is moving the runtime's clock, so the refill is exact.
  const waits: number[] = [];
  const sleep: Sleep = async (ms) => {
    waits.push(ms);
    clock.advance(ms);
  };
  const { code, lines, notices } = await run([url, '--token', created.body.token], messageLines('quota', 130), {}, sleep);
  assert.deepEqual(acksOf(lines), { acked: idsOf('quota', 130), other: [] }, 'each message acked once; a retried nack is not printed as an answer');
  assert.ok(notices.length >= 30, `at least 30 nacks were retried (${notices.length})`);
  const nacks = notices.map((notice) => JSON.parse(/^sluice device: (\{.*\}); sending it again in \d+ ms$/.exec(notice)![1]!) as { error: { code: string }; retry_after_ms: number });
  assert.ok(nacks.every((nack) => nack.error.code === 'ingest_quota_exceeded'), notices.join('\n'));
  assert.deepEqual(waits, nacks.map((nack) => nack.retry_after_ms), 'each wait is the one its nack named');
  assert.equal(code, 0);
  const stored = await call(rt.url, 'GET', `/organizations/${org}/events?type=bulk.ev&limit=500`, { token: orgKey });
  assert.equal(stored.body.events.length, 130);
});

/**
 * An org of one event a second whose first device is connected: its connect took two events on
 * credit, leaving the quota in debt, so the second device's connect is refused until it is paid off.
 */
async function connectRefusingOrg(org: string): Promise<{ holder: Awaited<ReturnType<typeof connectDevice>>; url: string; token: string }> {
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1 } })).status, 200);
  const devices = await Promise.all(['holder', 'cli'].map((name) => call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name } })));
  const holder = await connectDevice(rt.url, org, 'holder', devices[0]!.body.token);
  return { holder, url: `${rt.url.replace('http', 'ws')}${devices[1]!.body.device.socket_path}`, token: devices[1]!.body.token };
}

test("a connect the org's quota refuses (429) is tried again after a backoff, said on stderr, then the messages go", async () => {
  const { holder, url, token: cliToken } = await connectRefusingOrg('acct-device-cli-connect');
  try {
    const waits: number[] = [];
    const sleep: Sleep = async (ms) => {
      waits.push(ms);
      clock.advance(ms);
    };
    const { code, lines, notices } = await run([url, '--token', cliToken, '--send', '{"id":"after-refusal","type":"door.opened"}'], '', {}, sleep);
    const refusals = notices.filter((notice) => /^sluice device: refused with 429: ingest_quota_exceeded: .*; connecting again in \d+ ms$/.test(notice));
    assert.ok(refusals.length >= 1, notices.join('\n'));
    assert.ok(refusals.every((notice) => !notice.includes('.;')), `one sentence, not a full stop and then a semicolon: ${refusals[0]}`);
    assert.deepEqual(acksOf(lines), { acked: ['after-refusal'], other: [] }, lines.join('\n'));
    assert.equal(code, 0, notices.join('\n'));
  } finally {
    holder.close();
  }
});

test('as a process of its own, the CLI waits out a refused connect (nothing else holds it open then) and sends: exit 0 with the ack', async () => {
  const { holder, url, token: cliToken } = await connectRefusingOrg('acct-device-cli-process');
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', 'runtime/cli.ts', 'device', url, '--send', '{"id":"from-process","type":"door.opened"}'], {
      cwd: join(import.meta.dirname, '..'),
      env: { ...process.env, SLUICE_DEVICE_TOKEN: cliToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const stderr: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    // Each wait the CLI announces is moved on the runtime's clock, so the quota has refilled when it comes back.
    createInterface({ input: child.stderr }).on('line', (line) => {
      stderr.push(line);
      const wait = /(?:connecting|sending it) again in (\d+) ms$/.exec(line);
      if (wait !== null) clock.advance(Number(wait[1]));
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.ok(stderr.some((line) => line.includes('refused with 429: ingest_quota_exceeded')), stderr.join('\n'));
    assert.equal(code, 0, `${stdout}\n${stderr.join('\n')}`);
    assert.deepEqual(acksOf(stdout.trim().split('\n')), { acked: ['from-process'], other: [] });
  } finally {
    holder.close();
  }
});

test('a line longer than a device message may be is not sent: a frame_too_large nack names it, the other lines are stored, exit 1', async () => {
  const big = JSON.stringify({ id: 'too-big', type: 'bulk.ev', payload: { blob: 'x'.repeat(200_000) } });
  const { code, lines } = await run([socketUrl, '--token', token], `{"id":"around-1","type":"bulk.ev"}\n${big}\n{"id":"around-2","type":"bulk.ev"}\n`);
  const { acked, other } = acksOf(lines);
  assert.deepEqual(acked, ['around-1', 'around-2'], 'the socket stayed open for the lines after it');
  assert.equal(other.length, 1, lines.join('\n'));
  const nack = JSON.parse(other[0]!) as { type: string; id: string; error: { code: string; message: string }; retryable: boolean };
  assert.deepEqual([nack.type, nack.id, nack.error.code, nack.retryable], ['nack', 'too-big', 'frame_too_large', false]);
  assert.match(nack.error.message, /^A device message is at most 65536 bytes; this one is \d+, so sluice device did not send it\.$/);
  assert.equal(code, 1);
});

test('a socket that ends with messages unanswered names them on stderr, to send again by id, and says how far stdin was read', async () => {
  const org = 'acct-device-cli-cut';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'starter');
  const created = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'till' } });
  assert.equal(created.status, 201, created.text);
  const url = `${rt.url.replace('http', 'ws')}${created.body.device.socket_path}`;
  // 130 messages overrun the starter quota; its waits never end here, so the rest stay queued, and
  // stdin stays open (a file still being read), until a token rotation closes the socket (4401).
  let waited = (): void => undefined;
  const firstWait = new Promise<void>((resolve) => (waited = resolve));
  const stdin = new PassThrough();
  stdin.write(messageLines('cut', 130));
  const output = capturedOutput();
  const running = deviceCommand([url, '--token', created.body.token], { stdin, stdout: output.stdout, stderr: output.stderr, sleep: () => (waited(), new Promise<void>(() => undefined)) });
  await firstWait;
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/devices/till/token`, { token: orgKey })).status, 200);
  assert.equal(await running, 1);
  const acked = acksOf(output.out().trim().split('\n')).acked;
  const notices = output.err().trim().split('\n');
  assert.ok(notices.includes('sluice device: closed with 4401: token_rotated'), notices.join('\n'));
  const summary = /^sluice device: the socket ended with messages that have no answer: (?:(\d+) sent and unanswered, which may have been stored \(ids? ([^)]*)\); )?(\d+) not sent or waiting to be sent again \(ids? ([^)]*)\)\. Send them again with the same ids: one that was stored is acked with "duplicate":true$/.exec(notices.at(-2) ?? '');
  assert.ok(summary, notices.join('\n'));
  // Every message is acked on stdout or counted here; the first named are the first not acked.
  const [, sent = '0', sentIds, unsent = '0', unsentIds = ''] = summary;
  assert.equal(acked.length + Number(sent) + Number(unsent), 130);
  const notAcked = Array.from({ length: 130 }, (_, i) => `cut-${i + 1}`).filter((id) => !acked.includes(id));
  const named = [...(sentIds === undefined ? [] : sentIds.split(' and ')[0]!.split(', ')), ...unsentIds.split(' and ')[0]!.split(', ')];
  assert.ok(named.every((id) => notAcked.includes(id)), `${named.join(',')} are all unacked`);
  assert.equal(notices.at(-1), 'sluice device: stdin was read up to its message 130: the lines after it were not read');
});

test('stdin with no message in it (an empty pipe) exits 1 saying nothing was sent', async () => {
  for (const blank of ['', '\n', '   \n\n']) {
    const { code, notices } = await run([socketUrl, '--token', token], blank);
    assert.equal(code, 1, JSON.stringify(blank));
    assert.deepEqual(notices, ['sluice device: stdin held no message (only blank lines or none): nothing was sent']);
  }
});

test('a blank --send is refused before connecting, not taken for a run that sent nothing', async () => {
  for (const blank of ['', '   ']) {
    await assert.rejects(run([socketUrl, '--token', token, '--send', '{"id":"t-2","type":"t"}', '--send', blank], ''), { message: '--send is empty: give it the message to send.' });
  }
});

test('an empty --token is refused, not replaced by SLUICE_DEVICE_TOKEN', async () => {
  await assert.rejects(run([socketUrl, '--token', '', '--send', '{"id":"t-1","type":"t"}'], '', { SLUICE_DEVICE_TOKEN: token }), { message: 'The device token is empty.' });
});

test('a connect refused with 429 every time is tried 8 times in all, each wait said on stderr, then given up saying so: exit 1', async () => {
  const server = await startRefusingUpgradeServer(429, '{"error":{"code":"ingest_quota_exceeded","message":"This organization may send 1 events per second; retry after 1 s."}}');
  try {
    const fake = new URL(socketUrl);
    fake.host = `127.0.0.1:${server.port}`;
    const waits: number[] = [];
    const refused = await run([fake.href, '--token', token, '--send', '{"id":"x","type":"t"}'], '', {}, async (ms) => void waits.push(ms));
    assert.equal(refused.code, 1);
    assert.equal(waits.length, 7);
    assert.equal(refused.notices.filter((line) => /^sluice device: refused with 429: ingest_quota_exceeded: .*; connecting again in \d+ ms$/.test(line)).length, 7, refused.notices.join('\n'));
    assert.ok(refused.notices.some((line) => /^sluice device: refused with 429: ingest_quota_exceeded: .*[^.] \(the 8th try: not tried again\)$/.test(line)), refused.notices.join('\n'));
  } finally {
    await server.close();
  }
});

test('what a refusing server that is not Sluice sends is not printed, only its size (a proxy\'s page may hold a session id)', async () => {
  const server = await startRefusingUpgradeServer(401, '\u001b]0;PWNED\u0007\u001b[2J refused');
  try {
    const fake = new URL(socketUrl);
    fake.host = `127.0.0.1:${server.port}`;
    const refused = await run([fake.href, '--token', token, '--send', '{"id":"x","type":"t"}']);
    assert.equal(refused.code, 1);
    assert.match(refused.notices[0]!, /^sluice device: refused with 401: a body of \d+ bytes that is not Sluice's JSON error \(not shown\)$/);
    assert.doesNotMatch([...refused.lines, ...refused.notices].join('\n'), /PWNED|[\u0000-\u0009\u000b-\u001f]/, 'not shown');
  } finally {
    await server.close();
  }
});

/**
 * A device socket that is not Sluice: it sends `first` frames to each connection, then records the
 * frames that arrive and acks each. What the command sends and prints is the subject.
 */
async function fakeDeviceServer(first: readonly string[]): Promise<{ readonly url: string; readonly received: string[]; close(): Promise<void> }> {
  const received: string[] = [];
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: (offered) => (offered.has(DEVICE_PROTOCOL) ? DEVICE_PROTOCOL : false) });
  wss.on('connection', (socket) => {
    for (const frame of first) socket.send(frame);
    socket.on('message', (data) => {
      const text = String(data);
      received.push(text);
      socket.send(JSON.stringify({ type: 'ack', id: JSON.parse(text).id, event_id: `evt-${received.length}`, duplicate: false }));
    });
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  const fake = new URL(socketUrl);
  fake.host = `127.0.0.1:${(wss.address() as AddressInfo).port}`;
  return {
    url: fake.href,
    received,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      await new Promise((resolve) => wss.close(resolve));
    },
  };
}

const READY = JSON.stringify({ type: 'ready', device: 'cli-1', connection_id: 'c', event_id: 'e' });

test('a line typed with its id last goes out with its id first (read unparsed by a busy Sluice), every member as typed', async () => {
  const server = await fakeDeviceServer([READY]);
  try {
    const typed = '{"type":"meter.read","payload":{"kwh":12345678901234567890},"id":"late-1"}';
    const result = await run([server.url, '--token', token], `${typed}\n`);
    assert.equal(result.code, 0, [...result.lines, ...result.notices].join('\n'));
    assert.deepEqual(server.received, ['{"id":"late-1","type":"meter.read","payload":{"kwh":12345678901234567890}}']);
    assert.equal(leadingFrameId(Buffer.from(server.received[0]!), false), 'late-1');
  } finally {
    await server.close();
  }
});

test('a second ready frame on one connection sends nothing again, and a frame that is not Sluice\'s goes to stderr, not stdout: exit 1', async () => {
  const server = await fakeDeviceServer([READY, READY, '<html>502 Bad Gateway</html>']);
  try {
    const result = await run([server.url, '--token', token, '--send', '{"id":"once-1","type":"door.opened"}']);
    assert.equal(result.code, 1, [...result.lines, ...result.notices].join('\n'));
    assert.deepEqual(server.received.map((text) => JSON.parse(text).id), ['once-1'], 'sent once');
    assert.deepEqual(result.lines.map((line) => JSON.parse(line).type), ['ready', 'ack'], 'stdout keeps to Sluice\'s frames');
    assert.equal(result.notices.length, 2, result.notices.join('\n'));
    assert.match(result.notices[0]!, /a second ready frame came on one connection \(ignored: nothing is sent again\)/);
    assert.match(result.notices[1]!, /a frame that is not one of Sluice's \(a JSON object with a type\) came .*<html>502 Bad Gateway<\/html>/);
  } finally {
    await server.close();
  }
});

test('a server that answers the handshake with a success is said to be likely not Sluice; one refusing with an error status is not', async () => {
  for (const [status, hinted] of [[200, true], [302, true], [403, false]] as const) {
    const server = await startRefusingUpgradeServer(status, '');
    try {
      const fake = new URL(socketUrl);
      fake.host = `127.0.0.1:${server.port}`;
      const refused = await run([fake.href, '--token', token, '--send', '{"id":"x","type":"t"}']);
      assert.equal(refused.code, 1);
      assert.equal(refused.notices[0], `sluice device: refused with ${status}: no body${hinted ? '; a WebSocket endpoint answers 101: is the url where Sluice listens?' : ''}`);
    } finally {
      await server.close();
    }
  }
});
