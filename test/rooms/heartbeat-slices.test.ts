// A heartbeat round sends to at most 1,000 sockets per event-loop turn (a send is a system call:
// 20,000 sockets at once held every request for ~0.2 s). Every socket still hears the round, and a
// socket closed between two slices of it is passed over (a closed uWS socket must not be touched).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const heartbeats = (client: LiveClient): number => client.messages.filter((m) => 'heartbeat' in m).length;

async function openMany(url: string, org: string, token: string, count: number): Promise<LiveClient[]> {
  const clients: LiveClient[] = [];
  for (let opened = 0; opened < count; opened += 100) {
    clients.push(...(await Promise.all(Array.from({ length: Math.min(100, count - opened) }, () => connectLive(url, org, { token })))));
  }
  return clients;
}

test('a round over more sockets than one slice reaches them all; sockets closed before their slice are passed over', { timeout: 120_000 }, async () => {
  const rt = await startRuntime({ args: ['--websockets', '4000', '--live-sockets-per-org', '2000'] });
  try {
    const keyA = await createOrg(rt.url, ADMIN_TOKEN, 'acct-beat-a');
    const adminB = await createOrg(rt.url, ADMIN_TOKEN, 'acct-beat-b');
    const made = await call(rt.url, 'POST', '/organizations/acct-beat-b/api-keys', { token: adminB, json: { role: 'viewer' } });
    assert.equal(made.status, 201, made.text);
    // Opened in this order, so org B's sockets come after the first slice's 1,000.
    const orgA = await openMany(rt.url, 'acct-beat-a', keyA, 1050);
    const orgB = await openMany(rt.url, 'acct-beat-b', made.body.key as string, 50);
    await Promise.all([...orgA, ...orgB].map((client) => client.waitFor(() => heartbeats(client) === 1, 'the heartbeat on joining')));

    const { rooms } = rt.runtime;
    rooms.heartbeat();
    // Closed at once, server side, while the round's later slices are still to come.
    rooms.closeSocketsOfKey('acct-beat-b', made.body.id as string);
    await Promise.all(orgA.map((client) => client.waitFor(() => heartbeats(client) === 2, 'the round\'s heartbeat', 20_000)));
    for (const client of orgB) assert.equal((await client.closed).code, 4401);
    assert.deepEqual(orgB.map(heartbeats), orgB.map(() => 1), 'none sent to a closed socket');
    assert.equal(rooms.subscriberCount, 1050, 'the runtime is still serving');
    for (const client of orgA) client.close();
  } finally {
    await rt.close();
  }
});
