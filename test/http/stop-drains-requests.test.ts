// A stop finishes the requests in flight, those whose body is read or checked in the schema
// threads too: a large webhook body and a delivery to a source with schemas, their bodies still
// arriving when the stop begins, were answered `503 stopping` where a small one was stored.

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, tempDir } from '../helpers/runtime.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';

/** A delivery whose headers and first bytes are sent now; `finish()` sends the rest and resolves with the raw answer. */
async function startDelivery(url: string, path: string, secret: string, body: string): Promise<{ finish: () => Promise<string> }> {
  const { port } = new URL(url);
  const id = `msg_${path.replaceAll('/', '_')}_${body.length}`;
  const headers = { ...signStandard(secret, id, Math.floor(Date.now() / 1000), body), 'content-length': String(Buffer.byteLength(body)), connection: 'close' };
  const socket = connect(Number(port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`POST ${path} HTTP/1.1\r\nHost: sluice\r\n${Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body.slice(0, 10)}`);
  return {
    finish: async () => {
      socket.write(body.slice(10));
      await closed;
      return answer;
    },
  };
}

test('a stop finishes deliveries in flight that need the schema threads (a large body, a source with schemas)', { timeout: 60_000 }, async () => {
  const dataDir = tempDir();
  try {
    const rt = await startRuntime({ dataDir });
    const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-stop');
    const secret = newStandardSecret();
    const schema = { type: 'object', properties: { amount: { type: 'integer' } }, required: ['amount'] };
    for (const source of [{ name: 'plain' }, { name: 'typed', event_types: { 'order.paid': schema } }]) {
      const created = await call(rt.url, 'POST', '/organizations/acct-stop/sources', { token: key, json: { ...source, secrets: [secret] } });
      assert.equal(created.status, 201, created.text);
    }
    const deliveries = {
      small: await startDelivery(rt.url, '/hooks/acct-stop/plain', secret, JSON.stringify({ type: 'order.paid', amount: 1 })),
      large: await startDelivery(rt.url, '/hooks/acct-stop/plain', secret, JSON.stringify({ type: 'order.paid', amount: 2, pad: 'x'.repeat(100_000) })),
      checked: await startDelivery(rt.url, '/hooks/acct-stop/typed', secret, JSON.stringify({ type: 'order.paid', amount: 3 })),
    };
    // Answered after uWS has read the three requests' headers, sent before this one's connection opened.
    assert.equal((await call(rt.url, 'GET', '/healthz')).status, 200);
    const stopped = rt.close();
    await new Promise((resolve) => setImmediate(resolve));
    const answers = await Promise.all(Object.values(deliveries).map((delivery) => delivery.finish()));
    const eventIds: string[] = [];
    for (const [i, name] of Object.keys(deliveries).entries()) {
      assert.match(answers[i]!, /^HTTP\/1\.1 204 /, `${name}: ${answers[i]!.slice(0, 300)}`);
      eventIds.push(/sluice-event-id: (\S+)/i.exec(answers[i]!)?.[1] ?? '');
    }
    await stopped;
    const again = await startRuntime({ dataDir });
    try {
      for (const id of eventIds) assert.equal((await call(again.url, 'GET', `/organizations/acct-stop/events/${id}`, { token: key })).status, 200, `${id} was stored`);
    } finally {
      await again.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
