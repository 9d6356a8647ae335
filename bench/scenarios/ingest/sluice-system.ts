// Sluice as the ingest scenario's subject: `sluice serve` in its own process on a fresh data dir,
// then an organization and a standard-webhooks source created through the public API.

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cpuProfileArgs } from '../../harness/cpu-profile.ts';
import { BENCH_ORG, BENCH_SOURCE, type HttpSystem } from './http-system.ts';

const CLI = join('runtime', 'cli.ts');

export const sluiceSystem: HttpSystem = {
  system: 'sluice',
  label: 'Sluice (sluice serve)',
  role: 'subject',
  work: 'verify, parse, dedup (inbox claim) + event + time index + recording in one LMDB txn (no workflow listens, so no runs), 204 after the flush',
  missing: (context) => (existsSync(join(context.repoRoot, CLI)) ? undefined : `${CLI} does not exist yet`),
  async start(context, secret) {
    const adminToken = randomBytes(24).toString('hex');
    const server = await context.children.startServer({
      name: 'sluice serve',
      command: process.execPath,
      args: [...cpuProfileArgs(), '--import', 'tsx', CLI, 'serve', '--port', '0', '--data-dir', context.tempDirs.make('sluice'), '--admin-token', adminToken],
      cwd: context.repoRoot,
      timeoutMs: 60_000,
    });
    try {
      const created = await postJson(`${server.baseUrl}/organizations`, adminToken, { id: BENCH_ORG, name: 'Bench', plan: 'pro' });
      const apiKey = (created as { api_key?: unknown }).api_key;
      if (typeof apiKey !== 'string') throw new Error('POST /organizations answered without an api_key');
      const source = await postJson(`${server.baseUrl}/organizations/${BENCH_ORG}/sources`, apiKey, {
        name: BENCH_SOURCE,
        scheme: 'standard-webhooks',
        secrets: [secret],
        environment: 'production',
      });
      const path = (source as { source?: { ingest_path?: unknown } }).source?.ingest_path;
      return { port: server.port, path: typeof path === 'string' ? path : `/hooks/${BENCH_ORG}/${BENCH_SOURCE}`, stop: () => server.stop() };
    } catch (error) {
      await server.stop();
      throw error;
    }
  },
};

async function postJson(url: string, token: string, body: unknown): Promise<unknown> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST ${new URL(url).pathname} answered ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}
