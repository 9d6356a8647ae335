// The few public-API calls the run scenarios need: an org with its admin key, a one-step webhook
// workflow, events through the API, reading run counts, devices. JSON over fetch, errors named.

export async function apiCall(baseUrl: string, method: string, path: string, token: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : (JSON.parse(text) as unknown) };
}

async function expect(status: number, call: Promise<{ status: number; json: unknown }>, what: string): Promise<unknown> {
  const result = await call;
  if (result.status !== status) throw new Error(`${what} answered ${result.status}: ${JSON.stringify(result.json).slice(0, 300)}`);
  return result.json;
}

/** Creates an org and returns its admin API key. */
export async function createOrg(baseUrl: string, adminToken: string, id: string, maxConcurrentRuns: number): Promise<string> {
  const created = await expect(201, apiCall(baseUrl, 'POST', '/organizations', adminToken, { id, name: id, plan: 'pro', max_concurrent_runs: maxConcurrentRuns }), `POST /organizations (${id})`);
  const key = (created as { api_key?: unknown }).api_key;
  if (typeof key !== 'string') throw new Error('POST /organizations answered without an api_key');
  return key;
}

export const BENCH_EVENT_TYPE = 'bench.effect';

/** One step: a webhook to `url`, with a timeout long enough to be held by the receiver. Returns the workflow id. */
export async function createWebhookWorkflow(baseUrl: string, orgId: string, apiKey: string, url: string, timeoutMs = 60_000, triggerEvent = BENCH_EVENT_TYPE): Promise<string> {
  const created = await expect(
    201,
    apiCall(baseUrl, 'POST', `/organizations/${orgId}/workflows`, apiKey, {
      name: 'bench effect',
      trigger_event: triggerEvent,
      channel: 'bench',
      steps: [{ id: 'effect', type: 'webhook', url, timeout_ms: timeoutMs, retry: { max_retries: 5, initial_ms: 200, max_ms: 2000 } }],
    }),
    'POST /workflows',
  );
  const id = (created as { workflow?: { id?: unknown } }).workflow?.id;
  if (typeof id !== 'string') throw new Error('POST /workflows answered without a workflow id');
  return id;
}

/** Sends `count` events with `concurrency` requests in flight; resolves with how many were accepted (202). */
export async function postEvents(baseUrl: string, orgId: string, apiKey: string, count: number, concurrency: number, idPrefix: string, onAccepted?: (index: number, atMs: number) => void): Promise<number> {
  let next = 0;
  let accepted = 0;
  const body = (i: number): string => JSON.stringify({ type: BENCH_EVENT_TYPE, id: `${idPrefix}-${i}`, payload: { n: i } });
  const sender = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const response = await fetch(`${baseUrl}/organizations/${orgId}/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: body(i),
      });
      await response.arrayBuffer();
      if (response.status === 202) {
        accepted += 1;
        onAccepted?.(i, performance.now());
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, sender));
  return accepted;
}

/** Counts the org's runs in one state by paging the list (500 a page). */
export async function countRuns(baseUrl: string, orgId: string, apiKey: string, state: string): Promise<number> {
  let count = 0;
  let cursor: string | null = null;
  do {
    const query: string = `state=${state}&limit=500${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const page = (await expect(200, apiCall(baseUrl, 'GET', `/organizations/${orgId}/runs?${query}`, apiKey), 'GET /runs')) as { runs: unknown[]; next_cursor: string | null };
    count += page.runs.length;
    cursor = page.next_cursor;
  } while (cursor !== null);
  return count;
}

/** One event through the API; resolves with the HTTP status once the answer arrived. */
export async function postEvent(baseUrl: string, orgId: string, apiKey: string, id: string): Promise<number> {
  const response = await fetch(`${baseUrl}/organizations/${orgId}/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: BENCH_EVENT_TYPE, id, payload: { id } }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** A standard-webhooks source; returns its ingest path. */
export async function createSource(baseUrl: string, orgId: string, apiKey: string, name: string, secret: string): Promise<string> {
  const created = await expect(
    201,
    apiCall(baseUrl, 'POST', `/organizations/${orgId}/sources`, apiKey, { name, scheme: 'standard-webhooks', secrets: [secret], environment: 'production' }),
    'POST /sources',
  );
  const path = (created as { source?: { ingest_path?: unknown } }).source?.ingest_path;
  return typeof path === 'string' ? path : `/hooks/${orgId}/${name}`;
}

/** A device in the production environment; returns its socket path and its token (shown once). */
export async function createDevice(baseUrl: string, orgId: string, apiKey: string, name: string): Promise<{ socketPath: string; token: string }> {
  const created = (await expect(201, apiCall(baseUrl, 'POST', `/organizations/${orgId}/devices`, apiKey, { name }), `POST /devices (${name})`)) as { device?: { socket_path?: unknown }; token?: unknown };
  if (typeof created.token !== 'string') throw new Error('POST /devices answered without a token');
  const path = created.device?.socket_path;
  return { socketPath: typeof path === 'string' ? path : `/devices/${orgId}/${name}`, token: created.token };
}
