// Scenario devices: durable device-message ingest over WebSockets, each message timed from its frame to
// its ack (on disk); Sluice's device sockets against a bare `ws` + LMDB server doing the same writes.

import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ServerChild } from '../../harness/children.ts';
import { failedResult, scenarioStatus, subjectToPeerRatios, type SystemMeta } from '../../result-helpers.ts';
import type { Scenario, ScenarioContext, ScenarioReport, SystemResult } from '../../scenario.ts';
import { createDevice, createOrg } from '../runs/runtime-api.ts';
import { startSluice } from '../runs/sluice-runtime.ts';
import type { DeviceLoadResult, DeviceLoadSpec, DeviceSocketSpec } from './devices-protocol.ts';
import { devicesSizes, type DevicesSizes } from './devices-sizes.ts';

export const devicesScenario: Scenario = {
  name: 'devices',
  title: 'Devices: durable device messages over WebSockets, frame sent -> ack (on disk) received',
  run: runDevices,
};

const ORG = 'acct-devices';
/** Devices registered at once through the API before the load starts. */
const CREATE_CONCURRENCY = 16;

const SLUICE: SystemMeta = {
  system: 'sluice',
  label: 'Sluice (sluice serve, device sockets)',
  role: 'subject',
  work: 'uWS device socket (token checked at the upgrade): caps, JSON parse and shape check, the device\'s schemas (none declared), ingest quota (none on this plan); inbox claim (ifNoExists on device + id) + event + their time indexes in one flushed LMDB write; then the ack',
};
const PEER: SystemMeta = {
  system: 'ws-lmdb',
  label: '`ws` + LMDB, same records, flushed before the ack',
  role: 'peer',
  work: '`ws` server (bench/peers/ws-lmdb-devices.ts, no auth): JSON.parse and shape check; the same claim (ifNoExists on device + id) + event + time-index records, same LMDB flags; ack after the write\'s own flush',
};

async function runDevices(context: ScenarioContext): Promise<ScenarioReport> {
  const sizes = devicesSizes(context.quick);
  const systems: SystemResult[] = [];
  const notes: string[] = [];
  const measure = async (meta: SystemMeta, run: () => Promise<DeviceLoadResult>): Promise<void> => {
    try {
      context.log(`devices: ${meta.label}`);
      const load = await run();
      systems.push(toSystem(meta, load));
    } catch (error) {
      systems.push(failedResult(meta, error));
    }
  };
  await measure(SLUICE, () => runSluice(context, sizes, notes));
  await measure(PEER, () => runPeer(context, sizes, notes));
  return {
    scenario: devicesScenario.name,
    title: devicesScenario.title,
    status: scenarioStatus(systems),
    unit: 'messages/s',
    method: [
      `closed loop from a load worker process (\`ws\` client, no compression): ${sizes.devices} device sockets, ${sizes.inFlightPerSocket} messages in flight on each (${sizes.devices * sizes.inFlightPerSocket} in all); JSON text frames {"id","type","payload"} with a unique id and the ingest scenario's ${sizes.payloadBytes} B payload; ${sizes.warmup} warm-up messages, then ${sizes.count} measured`,
      'latency: from sending a frame to receiving its ack, in the load worker; an ack means the message is on disk (LMDB flushed) in both systems; throughput = fresh acks / the measured phase\'s duration',
      'no workflow listens to the messages\' type: this is durable ingest alone (each message becomes an event that starts no run); the sockets are open (Sluice has recorded each device.connected) before the warm-up',
      'the same work and durability: both parse the frame, deduplicate by (device, message id) with an ifNoExists claim, write the claim, the event and their time indexes in one write, and ack after that write\'s own flush (overlappingSync + separateFlushed, as runtime/ledger/open-ledger.ts); each system in its own process on a fresh data dir',
      'no target in the issue for devices: the numbers are reported for information',
    ],
    systems,
    ratios: subjectToPeerRatios(systems),
    latencyCurve: [],
    targets: [],
    notes,
  };
}

function toSystem(meta: SystemMeta, load: DeviceLoadResult): SystemResult {
  return {
    ...meta,
    status: 'measured',
    throughputPerSec: load.throughputPerSec,
    completed: load.completed,
    accepted: load.accepted,
    errors: load.completed - load.accepted,
    durationSec: load.durationSec,
    ...(load.p50Ms === undefined ? {} : { p50Ms: load.p50Ms }),
    ...(load.p99Ms === undefined ? {} : { p99Ms: load.p99Ms }),
    ...(load.firstError === undefined ? {} : { note: `${load.nacks} nacks, ${load.duplicates} duplicate acks; first: ${load.firstError.slice(0, 200)}` }),
  };
}

function runLoad(context: ScenarioContext, sizes: DevicesSizes, port: number, sockets: readonly DeviceSocketSpec[], idPrefix: string): Promise<DeviceLoadResult> {
  const spec: DeviceLoadSpec = {
    port,
    sockets,
    inFlightPerSocket: sizes.inFlightPerSocket,
    payloadBytes: sizes.payloadBytes,
    idPrefix,
    warmup: sizes.warmup,
    count: sizes.count,
    timeoutMs: sizes.timeoutMs,
  };
  return context.children.runJson({
    name: 'device load worker',
    command: process.execPath,
    args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'scenarios', 'devices', 'device-load-worker.ts'), JSON.stringify(spec)],
    cwd: context.repoRoot,
    timeoutMs: sizes.timeoutMs + 30_000,
  }) as Promise<DeviceLoadResult>;
}

/** The server's and the load worker's CPU shares, and what the server stored against what was acked. */
function serverNote(system: string, cores: number | undefined, stored: number | undefined, load: DeviceLoadResult, counter: string): string {
  const cpu = cores === undefined ? 'CPU not readable' : `used ${(cores * 100).toFixed(0)} % of one core during the load (connect and warm-up included)`;
  const acked = load.warmupAcked + load.accepted;
  const count = stored === undefined ? `${counter} not readable` : `${stored} messages stored (${counter}) for ${acked} fresh acks`;
  return `${system}: the server process ${cpu}; the load worker used ${(load.loadCpuCores * 100).toFixed(0)} % of one core in the measured phase; ${count}`;
}

async function runSluice(context: ScenarioContext, sizes: DevicesSizes, notes: string[]): Promise<DeviceLoadResult> {
  const runtime = await startSluice(context, { label: 'sluice serve (devices)' });
  try {
    const apiKey = await createOrg(runtime.baseUrl, runtime.adminToken, ORG, 4);
    const sockets: DeviceSocketSpec[] = [];
    for (let first = 0; first < sizes.devices; first += CREATE_CONCURRENCY) {
      const names = Array.from({ length: Math.min(CREATE_CONCURRENCY, sizes.devices - first) }, (_, i) => `dev-${first + i}`);
      const created = await Promise.all(names.map((name) => createDevice(runtime.baseUrl, ORG, apiKey, name)));
      sockets.push(...created.map(({ socketPath, token }) => ({ path: socketPath, token })));
    }
    const cpuBefore = runtime.cpuSeconds();
    const started = performance.now();
    const load = await runLoad(context, sizes, runtime.port, sockets, 'sluice');
    const cpuAfter = runtime.cpuSeconds();
    const cores = cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / ((performance.now() - started) / 1000);
    notes.push(serverNote('sluice', cores, await storedDeviceMessages(runtime.baseUrl), load, 'sluice_ingest_total{outcome="accepted_device"}'));
    return load;
  } finally {
    await runtime.stop();
  }
}

/** The runtime's own count of device messages stored, from GET /metrics. */
async function storedDeviceMessages(baseUrl: string): Promise<number | undefined> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('sluice_ingest_total{') && l.includes('outcome="accepted_device"'));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

interface PeerStats {
  readonly cpuSeconds: number;
  readonly stored: number;
}

async function peerStats(server: ServerChild): Promise<PeerStats> {
  return (await (await fetch(`${server.baseUrl}/stats`)).json()) as PeerStats;
}

async function runPeer(context: ScenarioContext, sizes: DevicesSizes, notes: string[]): Promise<DeviceLoadResult> {
  const server = await context.children.startServer({
    name: 'ws-lmdb-devices',
    command: process.execPath,
    args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'peers', 'ws-lmdb-devices.ts'), '--port', '0', '--data-dir', context.tempDirs.make('ws-lmdb-devices')],
    cwd: context.repoRoot,
    timeoutMs: 30_000,
  });
  try {
    // The peer checks no token: the path names the device.
    const sockets = Array.from({ length: sizes.devices }, (_, i) => ({ path: `/devices/${ORG}/dev-${i}`, token: 'unchecked' }));
    const before = await peerStats(server);
    const started = performance.now();
    const load = await runLoad(context, sizes, server.port, sockets, 'peer');
    const after = await peerStats(server);
    const cores = (after.cpuSeconds - before.cpuSeconds) / ((performance.now() - started) / 1000);
    notes.push(serverNote(PEER.system, cores, after.stored, load, 'its own count'));
    return load;
  } finally {
    await server.stop();
  }
}
