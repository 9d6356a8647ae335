// Sluice behind a proxy at a path (http://host/sluice or http://host/sluice/): every REST call,
// live socket and device socket of the client goes under that path, and a path given without its
// leading slash still names the endpoint. A real HTTP server records what was asked of it.

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { connectDevice, DeviceError, LiveClosedError, SluiceClient, watchRuns, type Sleep } from '../../kits/client/index.ts';

const noWait: Sleep = async () => undefined;
let server: Server;
let origin: string;
/** The path (and query) of every request and upgrade, in order. */
const asked: string[] = [];

before(async () => {
  server = createServer((request, response) => {
    asked.push(request.url ?? '');
    response.writeHead(200, { 'content-type': 'application/json' }).end('{"event":{"id":"evt_1"},"run":{"run_id":"run_1","state":"completed"}}');
  });
  // Each upgrade is refused for good (401), so the socket's `done` settles and says where it went.
  server.on('upgrade', (request, socket) => {
    asked.push(request.url ?? '');
    socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
after(() => server.close());

/** The paths asked while `work` ran. */
async function pathsOf(work: () => Promise<unknown>): Promise<string[]> {
  const start = asked.length;
  await work();
  return asked.slice(start);
}

for (const base of ['/sluice', '/sluice/']) {
  test(`REST calls keep the base path ${base}, with or without the path's leading slash`, async () => {
    const client = new SluiceClient({ url: `${origin}${base}`, apiKey: 'k', org: 'o', sleep: noWait });
    assert.deepEqual(await pathsOf(() => client.request('GET', '/events')), ['/sluice/organizations/o/events']);
    assert.deepEqual(await pathsOf(() => client.request('GET', 'events')), ['/sluice/organizations/o/events']);
    assert.deepEqual(await pathsOf(() => client.request('GET', '//health')), ['/sluice/health'], '`//` is from Sluice\'s root, under the base path');
    assert.deepEqual(await pathsOf(() => client.getRun('run_1', 'sandbox')), ['/sluice/organizations/o/runs/run_1?environment=sandbox']);
  });

  test(`live and device sockets keep the base path ${base}`, async () => {
    const live = watchRuns({ url: `${origin}${base}`, apiKey: 'k', org: 'o', runId: 'run_1', sleep: noWait, onUpdate: () => undefined });
    assert.deepEqual(await pathsOf(() => assert.rejects(live.done, LiveClosedError)), ['/sluice/organizations/o/live?run_id=run_1']);
    const device = connectDevice({ url: `${origin}${base}`, org: 'o', device: 'd1', token: 't', sleep: noWait });
    assert.deepEqual(await pathsOf(() => assert.rejects(device.done, DeviceError)), ['/sluice/devices/o/d1']);
  });
}

test('a url with no path still works, and one with a query is refused rather than losing it', async () => {
  const client = new SluiceClient({ url: origin, apiKey: 'k', org: 'o', sleep: noWait });
  assert.deepEqual(await pathsOf(() => client.request('GET', 'events')), ['/organizations/o/events']);
  assert.throws(() => new SluiceClient({ url: `${origin}/?tenant=1`, apiKey: 'k', org: 'o' }), /no query or fragment/);
});
