// A webhook step's 2xx that Sluice took before a clean stop, or while it stops, is recorded: the
// answer's body, still arriving, is cut off as the stop begins, so the step completes while the
// run engine still records it. (Found by a probe: the body was ended only when the connections
// closed, after the engine, so the attempt was left open, explained as "may have reached its
// target", and sent again after the restart: a second effect for a delivery already answered.)

import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';

const ORG = 'acct-answered-stop';
const WHOLE = '{"id":"abc123"}';

/**
 * A receiver that answers `200` at once (`headersAt: 'request'`) or only when told (`answer()`),
 * then sends its chunked body one byte at a time for as long as the connection lasts; or, told,
 * answers with its whole body in one write (`whole`).
 */
async function tricklingReceiver(headersAt: 'request' | 'told' | 'whole') {
  const requests: string[] = [];
  const sockets = new Set<Socket>();
  let told: () => void = () => undefined;
  const answered = new Promise<void>((resolve) => (told = resolve));
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      const before = head.length;
      head += chunk.toString('latin1');
      if (before > 0 && head.slice(0, before).includes('\r\n\r\n')) return;
      if (!head.includes('\r\n\r\n')) return;
      requests.push(head.slice(0, head.indexOf('\r\n\r\n')));
      const start = (): void => {
        if (headersAt === 'whole') {
          socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${WHOLE.length}\r\n\r\n${WHOLE}`);
          return;
        }
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n');
        const trickle = setInterval(() => (socket.writable ? socket.write('1\r\nx\r\n') : clearInterval(trickle)), 100);
        socket.on('close', () => clearInterval(trickle));
      };
      if (headersAt === 'request') start();
      else void answered.then(start);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    requests,
    answer: told,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

for (const headersAt of ['request', 'told', 'whole'] as const) {
  const when = headersAt === 'request' ? 'whose body still arrives, answered before the stop' : headersAt === 'told' ? 'whose body still arrives, answered once the stop began' : 'with its whole body, answered once the stop began';
  test(`a 2xx ${when}, completes the step: nothing is sent again after the restart`, async () => {
    const dataDir = tempDir();
    const receiver = await tricklingReceiver(headersAt);
    let rt = await startRuntime({ dataDir });
    try {
      const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
      const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'w', trigger_event: 'e', steps: [{ id: 's', type: 'webhook', url: receiver.url, timeout_ms: 30_000 }] } });
      assert.equal(made.status, 201, made.text);
      const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'e', payload: {} } });
      assert.equal(sent.status, 202, sent.text);
      await eventually('the request out', () => receiver.requests.length, (count) => count === 1);
      const runId = ((await call(rt.url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ run_id: string }>)[0]!.run_id;
      // The stop takes a few turns of the event loop before the engine closes; an answer on loopback
      // takes about as long. The engine's close waits (up to 3 s) for the answer to be recorded, so
      // that the test does not turn on that race: without the cut at the stop it never is.
      const { engine, context } = rt.runtime;
      const closeEngine = engine.close.bind(engine);
      engine.close = async () => {
        await eventually('the answer recorded', () => context.runs.get(ORG, runId)?.value, (state) => state === 'completed', 3000).catch(() => undefined);
        return closeEngine();
      };
      let closing: Promise<void>;
      if (headersAt === 'request') {
        // The answer's head is on its way on loopback: give the event loop a moment to read it.
        await new Promise((resolve) => setTimeout(resolve, 200));
        closing = rt.close();
      } else {
        closing = rt.close();
        receiver.answer();
      }
      await closing;

      rt = await startRuntime({ dataDir });
      const runs = (await call(rt.url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ run_id: string; state: string }>;
      assert.deepEqual(runs.map((run) => run.state), ['completed'], 'completed before the stop ended');
      const view = (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runs[0]!.run_id}`, { token: key })).body.run;
      const attempts = view.steps[0].attempts as Array<{ outcome: string; evidence: { status?: number; body?: string; body_cut_off?: boolean } }>;
      // A whole body is kept whole, not cut off by the stop.
      const body = headersAt === 'whole' ? WHOLE : 'x';
      const expected = ['succeeded', 200, headersAt === 'whole' ? undefined : true, body];
      assert.deepEqual(attempts.map((attempt) => [attempt.outcome, attempt.evidence.status, attempt.evidence.body_cut_off, attempt.evidence.body?.slice(0, body.length)]), [expected]);
      assert.equal(receiver.requests.length, 1, 'sent once');
    } finally {
      await rt.close();
      await receiver.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
}
