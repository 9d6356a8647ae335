// An https:// url at Sluice itself, which speaks plain HTTP: the TLS hello goes unanswered (uWS
// waits for a request line), so the client asks Sluice's liveness URL in plain HTTP once and, when
// Sluice answers there, stops at the first attempt and says to use http://; so does the live
// client (`sluice watch`) and the device client, which otherwise reconnected for ever. A server silent in both is tried
// again as before (a TLS server restarting looks the same at first).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectDevice, DeviceError, LiveClosedError, SluiceClient, SluiceNetworkError, watchRuns, type Sleep } from '../../kits/client/index.ts';
import { eventually } from '../helpers/receiver.ts';
import { startRuntime } from '../helpers/runtime.ts';
import { silentListener } from '../helpers/silent-listener.ts';

const noWait: Sleep = async () => undefined;

test('an https:// url at Sluice stops at the first attempt once Sluice answers its liveness URL in plain HTTP', async () => {
  const rt = await startRuntime();
  try {
    const port = new URL(rt.url).port;
    const client = new SluiceClient({ url: `https://127.0.0.1:${port}`, apiKey: 'k', org: 'o', sleep: noWait, timeoutMs: 1000 });
    const failed = await client.getEvent('evt_1').catch((error: unknown) => error);
    assert.ok(failed instanceof SluiceNetworkError, String(failed));
    assert.equal(failed.attempts, 1);
    assert.match(failed.message, new RegExp(`\\(1 attempt\\); the server speaks plain HTTP \\(Sluice answered http://127\\.0\\.0\\.1:${port}/healthz\\): use http:// instead of https://\\.$`));
  } finally {
    await rt.close();
  }
});

test('an https:// url at a server silent in plain HTTP too is tried again, with the hint only', async () => {
  const silent = await silentListener();
  try {
    const client = new SluiceClient({ url: `https://127.0.0.1:${silent.port}`, apiKey: 'k', org: 'o', sleep: noWait, timeoutMs: 300, maxAttempts: 2 });
    const failed = await client.getEvent('evt_1').catch((error: unknown) => error);
    assert.ok(failed instanceof SluiceNetworkError, String(failed));
    assert.equal(failed.attempts, 2);
    assert.doesNotMatch(failed.message, /speaks plain HTTP \(Sluice answered/);
  } finally {
    await silent.close();
  }
});

test('watchRuns at an https:// url at Sluice ends once Sluice answers its liveness URL in plain HTTP, saying to use http://', async () => {
  const rt = await startRuntime();
  try {
    const port = new URL(rt.url).port;
    const live = watchRuns({ url: `https://127.0.0.1:${port}`, apiKey: 'k', org: 'o', sleep: noWait, silenceMs: 1000, onUpdate: () => undefined });
    try {
      const ended = await Promise.race([live.done.catch((error: unknown) => error), new Promise((resolve) => setTimeout(() => resolve('still reconnecting after 10 s'), 10_000).unref())]);
      assert.ok(ended instanceof LiveClosedError, String(ended));
      assert.equal(ended.message, `the server speaks plain HTTP (Sluice answered http://127.0.0.1:${port}/healthz): use http:// instead of https://`);
    } finally {
      live.close();
    }
  } finally {
    await rt.close();
  }
});

test('connectDevice at an https:// url at Sluice ends once Sluice answers its liveness URL in plain HTTP; its pending send is rejected with it', async () => {
  const rt = await startRuntime();
  try {
    const port = new URL(rt.url).port;
    const device = connectDevice({ url: `https://127.0.0.1:${port}`, org: 'o', device: 'd', token: 't', sleep: noWait, silenceMs: 1000 });
    const sent = device.send({ type: 'reading.taken' }).catch((error: unknown) => error);
    try {
      const ended = await Promise.race([device.done.catch((error: unknown) => error), new Promise((resolve) => setTimeout(() => resolve('still reconnecting after 10 s'), 10_000).unref())]);
      assert.ok(ended instanceof DeviceError, String(ended));
      assert.equal(ended.code, 'plain_http');
      assert.equal(ended.message, `The server speaks plain HTTP (Sluice answered http://127.0.0.1:${port}/healthz): use http:// instead of https://.`);
      assert.equal(await sent, ended);
    } finally {
      device.close();
    }
  } finally {
    await rt.close();
  }
});

test('watchRuns at an https:// url at a server silent in plain HTTP too goes on reconnecting, with the hint only', async () => {
  const silent = await silentListener();
  const disconnects: string[] = [];
  const live = watchRuns({ url: `https://127.0.0.1:${silent.port}`, apiKey: 'k', org: 'o', sleep: noWait, silenceMs: 300, onUpdate: () => undefined, onDisconnect: (why) => disconnects.push(why) });
  let ended = false;
  void live.done.then(() => (ended = true), () => (ended = true));
  try {
    await eventually('two disconnects', () => disconnects.length, (n) => n >= 2);
    assert.equal(ended, false);
    assert.match(disconnects[1]!, /use http:\/\/ instead of https:\/\/$/);
  } finally {
    live.close();
    await live.done;
    await silent.close();
  }
});
