// The REST client against a scripted HTTP server: an answer of the wrong shape to sendEvent, a 204
// to a call that expects an answer, an export page without its closing line, or a page (of an
// export or a list) naming one already read as the next is `invalid_answer` (not a TypeError or undefined), a Retry-After too long to wait
// out ends the retries with the hint on the error, and counts that cannot work (maxAttempts NaN, 0,
// 2.5) are refused when given.

import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { after, test } from 'node:test';
import { connectDevice, SluiceApiError, SluiceArgumentError, SluiceClient, watchRuns, type Sleep } from '../../kits/client/index.ts';

const servers: import('node:http').Server[] = [];
after(() => servers.forEach((server) => server.close()));

/** A server answering each request with `answer`; `requests()` counts them. */
async function scripted(answer: (res: ServerResponse) => void): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => answer(res));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, requests: () => requests };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) => (res: ServerResponse): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
};

test('sendEvent answered 2xx without an event is invalid_answer, as getEvent is', async () => {
  for (const [status, body] of [[200, {}], [202, null]] as const) {
    const { url } = await scripted(json(status, body));
    const client = new SluiceClient({ url, apiKey: 'k', org: 'o' });
    await assert.rejects(client.sendEvent({ type: 'order.created', payload: {} }), (error: unknown) => {
      assert.ok(error instanceof SluiceApiError, `got ${String(error)}`);
      assert.equal(error.code, 'invalid_answer');
      assert.match(error.message, /no "event"/);
      return true;
    });
  }
});

test('an answer whose event or run has no id (another server\'s {"event":{}}) is invalid_answer, not a record printed as "undefined"', async () => {
  const { url } = await scripted(json(200, { event: {}, run: { state: 'completed' } }));
  const client = new SluiceClient({ url, apiKey: 'k', org: 'o' });
  for (const [name, call, member] of [['replayEvent', () => client.replayEvent('evt_1', { sideEffects: 'skip' }), 'event'], ['getEvent', () => client.getEvent('evt_1'), 'event'], ['cancelRun', () => client.cancelRun('run_1'), 'run']] as const) {
    await assert.rejects(call(), (error: unknown) => error instanceof SluiceApiError && error.code === 'invalid_answer' && error.message.includes(`its "${member}" has no`), name);
  }
});

test('a 204 to a call that expects an answer (sendEvent, getEvent, getRun) is invalid_answer, not undefined', async () => {
  const { url } = await scripted((res) => res.writeHead(204).end());
  const client = new SluiceClient({ url, apiKey: 'k', org: 'o' });
  for (const [name, call] of [['sendEvent', () => client.sendEvent({ type: 'order.created', payload: {} })], ['getEvent', () => client.getEvent('evt_1')], ['getRun', () => client.getRun('run_1')]] as const) {
    await assert.rejects(call(), (error: unknown) => error instanceof SluiceApiError && error.code === 'invalid_answer' && error.status === 204, name);
  }
});

test('an answer larger than any of Sluice\'s is invalid_answer at once, not read whole and not retried: streamed past the cap, or declared so', async () => {
  const MIB = 1024 * 1024;
  const chunk = Buffer.alloc(MIB, 0x61);
  let sent = 0;
  const streamed = await scripted((res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    // Up to 80 MiB, written as the client reads: stops once the client has gone.
    const more = (): void => {
      while (sent < 80 * MIB && !res.destroyed) {
        sent += MIB;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  const declared = await scripted((res) => res.writeHead(200, { 'content-type': 'text/html', 'content-length': String(600 * MIB) }).write('<html>'));
  for (const [name, server] of [['streamed', streamed], ['declared', declared]] as const) {
    const client = new SluiceClient({ url: server.url, apiKey: 'k', org: 'o', sleep: async () => undefined });
    await assert.rejects(client.getRun('run_1'), (error: unknown) => {
      assert.ok(error instanceof SluiceApiError, `${name}: got ${String(error)}`);
      assert.equal(error.code, 'invalid_answer');
      assert.match(error.message, /with a body larger than 64 MiB, which no Sluice answer is \(not read\)/);
      return true;
    });
    assert.equal(server.requests(), 1, `${name}: asked once (a GET is otherwise retried)`);
  }
  assert.ok(sent < 80 * MIB, `the streamed body was not read to its end (${sent / MIB} MiB written)`);
});

test('onRetry is told before each wait; what it throws, or an async one rejects with, is a process warning, not the call\'s failure', async () => {
  const { url, requests } = await scripted(json(503, { error: { code: 'server_busy', message: 'busy' } }));
  const told: string[] = [];
  const warnings: string[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning.message);
  process.on('warning', onWarning);
  try {
    for (const onRetry of [(notice: { attempt: number; reason: string }) => { told.push(`${notice.attempt} ${notice.reason}`); throw new Error('sync boom'); }, async () => { throw new Error('async boom'); }]) {
      const client = new SluiceClient({ url, apiKey: 'k', org: 'o', maxAttempts: 2, sleep: async () => undefined, onRetry });
      await assert.rejects(client.getRun('run_1'), (error: unknown) => error instanceof SluiceApiError && error.status === 503);
    }
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(told, ['1 answered 503'], 'once, before the one wait of two attempts');
    assert.deepEqual(warnings.filter((message) => message.startsWith('Sluice client onRetry threw')), ['Sluice client onRetry threw: sync boom', 'Sluice client onRetry threw: async boom']);
    assert.equal(requests(), 4);
  } finally {
    process.off('warning', onWarning);
  }
});

test('a Retry-After the client can wait out is waited; a longer one ends the retries with the hint on the error', async () => {
  const waits: number[] = [];
  const sleep: Sleep = async (ms) => void waits.push(ms);
  const brief = await scripted(json(503, { error: { code: 'busy', message: 'later' } }, { 'retry-after': '7' }));
  const client = new SluiceClient({ url: brief.url, apiKey: 'k', org: 'o', maxAttempts: 2, sleep });
  await assert.rejects(client.getEvent('evt_1'), (error: unknown) => error instanceof SluiceApiError && error.status === 503 && error.retryAfterMs === 7000);
  assert.deepEqual(waits, [7000]);
  assert.equal(brief.requests(), 2);

  waits.length = 0;
  const month = await scripted(json(503, { error: { code: 'maintenance', message: 'back next month' } }, { 'retry-after': '2592000' }));
  const patient = new SluiceClient({ url: month.url, apiKey: 'k', org: 'o', sleep });
  await assert.rejects(patient.getEvent('evt_1'), (error: unknown) => error instanceof SluiceApiError && error.code === 'maintenance' && error.retryAfterMs === 2_592_000_000);
  assert.deepEqual(waits, [], 'no wait: a timer that long would fire at once');
  assert.equal(month.requests(), 1);
});

test('maxAttempts, afterSeq and maxPending that are not whole numbers in range are refused when given', () => {
  for (const maxAttempts of [Number(undefined), 0, -1, 2.5, 101, Infinity]) {
    assert.throws(() => new SluiceClient({ url: 'http://127.0.0.1:1', apiKey: 'k', org: 'o', maxAttempts }), (error: unknown) => error instanceof RangeError && error.message.includes('maxAttempts'));
  }
  assert.equal(new SluiceClient({ url: 'http://127.0.0.1:1', apiKey: 'k', org: 'o', maxAttempts: 1 }).org, 'o');
  for (const afterSeq of [-1, 1.5, Number.NaN, 10 ** 15]) {
    assert.throws(() => watchRuns({ url: 'http://127.0.0.1:1', apiKey: 'k', org: 'o', afterSeq, onUpdate: () => undefined }), (error: unknown) => error instanceof RangeError && error.message.includes('afterSeq'), String(afterSeq));
  }
  for (const maxPending of [Number(undefined), 0, 1.5]) {
    assert.throws(() => connectDevice({ url: 'http://127.0.0.1:1', org: 'o', device: 'd', token: 't', maxPending }), (error: unknown) => error instanceof RangeError && error.message.includes('maxPending'));
  }
});

// Found by review: a device named "." or ".." (or such an org) made a URL that resolved away from
// the device socket, and the device got a confusing http_404 from whatever path it reached.
test('a device connection refuses an org or device of "." or "..", or an empty one, before connecting, as the REST client does', () => {
  for (const [org, device] of [['..', 'd'], ['.', 'd'], ['o', '..'], ['o', '.'], ['', 'd'], ['o', '']] as const) {
    assert.throws(() => connectDevice({ url: 'http://127.0.0.1:1', org, device, token: 't' }), (error: unknown) => error instanceof SluiceArgumentError && /names no record|is empty/.test(error.message), `${org}/${device}`);
  }
});

test('an export page without the line that closes it (a proxy\'s page, a cut body, a more without a cursor) is invalid_answer', async () => {
  for (const body of ['<html>login</html>', '{"kind":"export","format":1}\n', '{"kind":"run"}\n{"kind":"more"}\n', '']) {
    const { url } = await scripted((res) => res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end(body));
    const client = new SluiceClient({ url, apiKey: 'k', org: 'o' });
    await assert.rejects(
      (async () => {
        for await (const page of client.exportPages()) void page;
      })(),
      (error: unknown) => error instanceof SluiceApiError && error.code === 'invalid_answer' && /GET \/organizations\/o\/export answered without the line that ends an export page/.test(error.message),
      JSON.stringify(body),
    );
  }
  // A page naming itself as the next one (a server that would be asked for it without end).
  const { url, requests } = await scripted((res) => res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end('{"kind":"run"}\n{"kind":"more","next_cursor":"c1"}\n'));
  const pages: string[][] = [];
  await assert.rejects(
    (async () => {
      for await (const page of new SluiceClient({ url, apiKey: 'k', org: 'o' }).exportPages()) pages.push(page.lines);
    })(),
    (error: unknown) => error instanceof SluiceApiError && error.code === 'invalid_answer' && /named a page already read as the next one/.test(error.message),
  );
  assert.deepEqual(pages, [['{"kind":"run"}']]);
  assert.equal(requests(), 2);
});

test('a list whose pages name one already read as the next (a server, or a cache in front that drops the query) is invalid_answer, not asked for without end', async () => {
  for (const cursors of [['c1'], ['c1', 'c2']]) {
    let n = 0;
    const { url, requests } = await scripted(json(200, { runs: [{ run_id: `run_${n}` }], get next_cursor() { return cursors[n++ % cursors.length]; } }));
    const seen: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const run of new SluiceClient({ url, apiKey: 'k', org: 'o' }).runs()) seen.push(run);
      })(),
      (error: unknown) => error instanceof SluiceApiError && error.code === 'invalid_answer' && /GET \/runs named a page already read as the next one: the list would not end/.test(error.message),
      cursors.join(),
    );
    assert.equal(requests(), cursors.length + 1, 'each page read once, then the one named again');
    assert.equal(seen.length, cursors.length + 1);
  }
});

test('a header value fetch would refuse is a SluiceArgumentError at once, naming the header, never its value; nothing is sent', async () => {
  const server = await scripted(json(200, { run: { run_id: 'run_1' } }));
  const client = new SluiceClient({ url: server.url, apiKey: 'sk_test', org: 'acct' });
  for (const [headers, said] of [
    [{ 'x-trace': 'secret\nvalue' }, /^The x-trace header's value holds U\+000A at position 6: a header value holds no line break/],
    [{ 'x-trace': 'caf\u0101' }, /^The x-trace header's value holds U\+0101 at position 3/],
    [{ 'bad name': 'v' }, /^"bad name" is not a header name/],
  ] as const) {
    await assert.rejects(client.request('GET', '/runs', { headers }), (error: unknown) => error instanceof SluiceArgumentError && said.test(error.message) && !error.message.includes('secret'), JSON.stringify(headers));
  }
  assert.equal(server.requests(), 0, 'nothing was sent, nothing retried');
  // A value with spaces, as many headers have, goes; so does one with a line break at its end, dropped as fetch drops it.
  assert.deepEqual(await client.request('GET', '/runs/run_1', { headers: { 'x-trace': 'a b; c=d' } }), { run: { run_id: 'run_1' } });
  assert.deepEqual(await client.request('GET', '/runs/run_1', { headers: { 'x-trace': 'trace-1\n' } }), { run: { run_id: 'run_1' } });
});

test('an id, org or key left unset is said to be missing, not sent as "undefined"', async () => {
  const server = await scripted(json(200, {}));
  assert.throws(() => new SluiceClient({ url: server.url, apiKey: 'sk_test', org: undefined as unknown as string }), (error: unknown) => error instanceof SluiceArgumentError && /The organization id is missing \(got undefined\)/.test(error.message));
  assert.throws(() => new SluiceClient({ url: server.url, apiKey: undefined as unknown as string, org: 'acct' }), /^TypeError: The API key is missing \(apiKey\)\.$/);
  const client = new SluiceClient({ url: server.url, apiKey: 'sk_test', org: 'acct' });
  assert.throws(() => client.getEvent(undefined as unknown as string), (error: unknown) => error instanceof SluiceArgumentError && /The event id is missing/.test(error.message));
  assert.equal(server.requests(), 0);
});
