// A reply the socket cannot take at once is sent as its client reads it, and its unread bytes are
// counted per org (unsent-replies.ts): a read whose large answer would pass the org's share is
// 503 server_busy instead, also when many are asked at once, until the answers held are read or
// their clients go; other requests of the org and another org are served meanwhile. A file of its
// own: its large answers' garbage collection made undici's pooled sockets of other tests' fetches fail.

import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { HttpServer } from '../../runtime/http/server.ts';
import type { Route } from '../../runtime/http/types.ts';
import { upgradeRequiredRoute } from '../../runtime/http/upgrade-required.ts';
import { createLogger } from '../../runtime/log.ts';
import { createRuntimeMetrics } from '../../runtime/metrics.ts';
import { countTurns } from '../helpers/loop-turns.ts';

const MiB = 1024 * 1024;
/** 20 MiB of a repeating pattern, so bytes out of order or missing show. */
const big = Array.from({ length: (20 * MiB) / 16 }, (_, i) => (i % 1_000_000).toString(16).padStart(16, '.')).join('');
/** 15 Mi characters of "é": 30 MiB in UTF-8. */
const accented = 'é'.repeat(15 * MiB);
let server: HttpServer;
let port: number;
/** Pages the `answersPages` route built, with the event-loop turn each was built in (`turns` counts them). */
const pagesBuilt: Array<{ org: string; turn: number }> = [];
const turns = countTurns();

/** A read answering pages (Route `answersPages`) of `text`, each build recorded in pagesBuilt. */
const pageRoute = (pattern: string, text: string): Route => ({
  method: 'GET',
  pattern,
  answersPages: true,
  handler: (request) => {
    pagesBuilt.push({ org: request.params.org_id ?? '', turn: turns.count() });
    return { status: 200, text };
  },
});

before(async () => {
  // An org's share is 48 MiB: two unread 20 MiB answers fit, a third does not.
  server = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), unsentReplyBytes: 256 * MiB, unsentReplyPerTenantBytes: 48 * MiB });
  server.addRoutes(
    { method: 'GET', pattern: '/orgs/:org_id/big', handler: () => ({ status: 200, text: big }) },
    { method: 'GET', pattern: '/orgs/:org_id/small', handler: () => ({ status: 200, text: 'small' }) },
    pageRoute('/orgs/:org_id/pages', big),
    pageRoute('/orgs/:org_id/accented-pages', accented),
    pageRoute('/orgs/:org_id/short-pages', 'a short page'),
  );
  port = await server.listen('127.0.0.1', 0);
});
after(() => {
  turns.stop();
  return server.close();
});

/** A request through node:http, read whole (one connection per request: fetch's pool kept sockets the server closed). */
const ask = (path: string, atPort = port): Promise<{ status: number; retryAfter: string | undefined; text: string }> =>
  new Promise((resolve, reject) => {
    httpGet({ host: '127.0.0.1', port: atPort, path, agent: false }, (answer) => {
      let text = '';
      answer.setEncoding('latin1').on('data', (chunk: string) => (text += chunk)).on('end', () => resolve({ status: answer.statusCode ?? 0, retryAfter: answer.headers['retry-after'], text }));
    }).on('error', reject);
  });

interface Unread {
  readonly socket: Socket;
  /** The status of its answer, once its first bytes came (it reads no further until `read`). */
  readonly status: Promise<number>;
  /** Reads the rest; resolves with the body. */
  read(): Promise<string>;
}

/** A client that asks for a big answer (of `atPort`'s server) and reads only its status line until told. */
function unread(atPort = port, path = '/orgs/noisy/big'): Unread {
  const socket = connect(atPort, '127.0.0.1');
  socket.write(`GET ${path} HTTP/1.1\r\nhost: x\r\n\r\n`);
  const chunks: Buffer[] = [];
  const status = new Promise<number>((resolve) =>
    socket.once('data', (chunk: Buffer) => {
      socket.pause();
      chunks.push(chunk);
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1'))?.[1] ?? 0));
    }),
  );
  return {
    socket,
    status,
    read: async () => {
      await status;
      return new Promise((resolve) => {
        socket.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          const all = Buffer.concat(chunks).toString('latin1');
          const body = all.slice(all.indexOf('\r\n\r\n') + 4);
          if (body.length >= big.length) resolve(body);
        });
        socket.resume();
      });
    },
  };
}

test('unread answers are counted per org: a read whose answer would pass the share is 503 until they are read or their clients go; the rest is served', async () => {
  const first = unread();
  const second = unread();
  assert.deepEqual([await first.status, await second.status], [200, 200], 'two fit the 48 MiB share');
  const third = await ask('/orgs/noisy/big');
  assert.equal(third.status, 503, 'a third 20 MiB answer would not');
  assert.equal(third.retryAfter, '1');
  assert.equal((JSON.parse(third.text) as { error: { code: string } }).error.code, 'server_busy');
  assert.equal((await ask('/orgs/noisy/small')).status, 200, 'a small answer of the org fits what is left');
  assert.equal((await ask('/orgs/quiet/big')).status, 200, 'another org is served');
  assert.equal(await first.read(), big, 'the held answer arrives whole and in order as it is read');
  first.socket.destroy();
  assert.equal((await ask('/orgs/noisy/big')).status, 200, 'read, its bytes were given back');
  second.socket.destroy();
  // Gone without reading: given back too; then many asked at once: no more than fit are held.
  let fourth = 503;
  for (let tries = 0; tries < 200 && fourth !== 200; tries++) fourth = (await ask('/orgs/noisy/big')).status;
  assert.equal(fourth, 200, 'gone, its bytes were given back');
  const burst = Array.from({ length: 6 }, () => unread());
  const statuses = await Promise.all(burst.map((client) => client.status));
  assert.deepEqual(statuses.filter((status) => status === 200).length, 2, `held at once: ${statuses.join(' ')}`);
  for (const client of burst) client.socket.destroy();
});

test("a WebSocket endpoint's plain GET, which checks no caller, answers its 426 while the org named in its path has no room: a stranger learns nothing of the org's load", async () => {
  // A share that two unread 20 MiB answers fill exactly.
  const full = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), unsentReplyBytes: 256 * MiB, unsentReplyPerTenantBytes: 40 * MiB });
  full.addRoutes(
    { method: 'GET', pattern: '/orgs/:org_id/big', handler: () => ({ status: 200, text: big }) },
    { method: 'GET', pattern: '/orgs/:org_id/small', handler: () => ({ status: 200, text: 'small' }) },
    upgradeRequiredRoute('/orgs/:org_id/live', '/orgs/<org>/live', 'Open a WebSocket here.'),
  );
  const fullPort = await full.listen('127.0.0.1', 0);
  const held = [unread(fullPort), unread(fullPort)];
  try {
    assert.deepEqual(await Promise.all(held.map((client) => client.status)), [200, 200]);
    assert.equal((await ask('/orgs/noisy/small', fullPort)).status, 503, 'the org has no room left');
    const live = await ask('/orgs/noisy/live', fullPort);
    const stranger = await ask('/orgs/no-such-org/live', fullPort);
    assert.equal(live.status, 426, live.text);
    assert.deepEqual(live, stranger, 'the same answer as for an org that does not exist');
  } finally {
    for (const client of held) client.socket.destroy();
    await full.close();
  }
});

test('a burst of page reads past the org\'s share builds only the pages that fit: the rest are refused in their turns, unbuilt', async () => {
  const burst = Array.from({ length: 8 }, () => unread(port, '/orgs/paged/pages'));
  try {
    const statuses = await Promise.all(burst.map((client) => client.status));
    assert.deepEqual([...statuses].sort(), [200, 200, 503, 503, 503, 503, 503, 503], 'two 20 MiB pages fit the 48 MiB share');
    assert.equal(pagesBuilt.filter((page) => page.org === 'paged').length, 2, 'the refused ones were not built first');
  } finally {
    for (const client of burst) client.socket.destroy();
  }
});

test('an org\'s page reads are built one at a time, each in an event-loop turn of its own', async () => {
  const answers = await Promise.all(Array.from({ length: 5 }, () => ask('/orgs/turns/short-pages')));
  assert.deepEqual(answers.map((answer) => answer.status), [200, 200, 200, 200, 200]);
  const builtIn = pagesBuilt.filter((page) => page.org === 'turns').map((page) => page.turn);
  assert.equal(new Set(builtIn).size, 5, `built in turns ${builtIn.join(', ')}`);
});

test('a page read is held to the size its same request answered last: the org\'s other, short page reads are served while its unread answers fill most of its share', async () => {
  assert.equal((await ask('/orgs/mixed/pages')).status, 200, 'read whole: 20 MiB remembered for this request');
  const held = [unread(port, '/orgs/mixed/big'), unread(port, '/orgs/mixed/big')];
  try {
    assert.deepEqual(await Promise.all(held.map((client) => client.status)), [200, 200], '40 MiB of the 48 MiB share unread');
    assert.equal((await ask('/orgs/mixed/short-pages')).status, 200, 'a short page fits what is left');
    const built = pagesBuilt.filter((page) => page.org === 'mixed').length;
    assert.equal((await ask('/orgs/mixed/pages')).status, 503, 'the large page again would not fit');
    assert.equal(pagesBuilt.filter((page) => page.org === 'mixed').length, built, 'refused unbuilt');
  } finally {
    for (const client of held) client.socket.destroy();
  }
});

test('a page read is held to its last answer\'s bytes, not its characters: a page of "é" that the room left would not take is refused unbuilt', async () => {
  assert.equal((await ask('/orgs/accents/accented-pages')).status, 200, 'read whole: 30 MiB (15 Mi characters) remembered');
  const held = unread(port, '/orgs/accents/big');
  try {
    assert.equal(await held.status, 200, '20 MiB of the 48 MiB share unread: 28 MiB left');
    const built = pagesBuilt.filter((page) => page.org === 'accents').length;
    assert.equal((await ask('/orgs/accents/accented-pages')).status, 503, '30 MiB would not fit');
    assert.equal(pagesBuilt.filter((page) => page.org === 'accents').length, built, 'refused unbuilt');
  } finally {
    held.socket.destroy();
  }
});
