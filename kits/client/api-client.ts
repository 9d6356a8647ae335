// The REST side of the TypeScript client, bound to one organization: send events (safe to retry:
// each carries an id), read events and runs page by page, resume, cancel and replay runs, and any
// other endpoint through `request`. Errors arrive as SluiceApiError with the API's code and field.

import { randomUUID } from 'node:crypto';
import { backoffMs, realSleep, type Sleep } from './retry.ts';

export interface ClientOptions {
  /** Where Sluice listens, e.g. http://127.0.0.1:8787. */
  readonly url: string;
  readonly apiKey: string;
  readonly org: string;
  /** Attempts of a request that is safe to repeat, the first included (default 5). */
  readonly maxAttempts?: number;
  readonly fetch?: typeof fetch;
  readonly sleep?: Sleep;
}

/** An answer of 4xx/5xx, with the API's error body: `{"error":{"code","message","field"?,...}}`. */
export class SluiceApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  /** The whole `error` object (a 409 duplicate names `original_event_id`, for instance). */
  readonly details: Readonly<Record<string, unknown>>;
  constructor(status: number, details: Readonly<Record<string, unknown>>) {
    super(typeof details['message'] === 'string' ? details['message'] : `Sluice answered ${status}.`);
    this.name = 'SluiceApiError';
    this.status = status;
    this.code = typeof details['code'] === 'string' ? details['code'] : 'http_error';
    this.field = typeof details['field'] === 'string' ? details['field'] : undefined;
    this.details = details;
  }
}

export type Environment = 'production' | 'sandbox';

export interface SluiceEvent {
  readonly id: string;
  readonly type: string;
  readonly payload: unknown;
  readonly environment: Environment;
  readonly source: string;
  readonly received_at: string;
  readonly [field: string]: unknown;
}

export interface RunSummary {
  readonly run_id: string;
  readonly workflow_id: string;
  readonly event_id: string;
  readonly environment: Environment;
  readonly state: string;
  readonly error: { readonly code: string; readonly message: string; readonly step_id: string | null } | null;
  readonly [field: string]: unknown;
}

export interface RequestOptions {
  readonly json?: unknown;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly headers?: Readonly<Record<string, string>>;
  /** Repeat on a network error, 429, 502, 503 or 504 (default: only for GET). Only for requests safe to repeat. */
  readonly retry?: boolean;
}

/** Statuses worth another attempt: the request may succeed later as it is. */
const RETRYABLE = new Set([429, 502, 503, 504]);

export class SluiceClient {
  readonly org: string;
  readonly #o: ClientOptions;
  readonly #fetch: typeof fetch;
  readonly #sleep: Sleep;

  constructor(options: ClientOptions) {
    this.#o = options;
    this.org = options.org;
    this.#fetch = options.fetch ?? fetch;
    this.#sleep = options.sleep ?? realSleep;
  }

  /**
   * Calls `method path` under /organizations/:org (a path starting with `//` is taken from the
   * root instead) and resolves with the parsed JSON answer (undefined for 204).
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = new URL(path.startsWith('//') ? path.slice(1) : `/organizations/${encodeURIComponent(this.org)}${path}`, this.#o.url);
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const headers: Record<string, string> = { authorization: `Bearer ${this.#o.apiKey}`, ...options.headers };
    if (options.json !== undefined) headers['content-type'] = 'application/json';
    const body = options.json === undefined ? undefined : JSON.stringify(options.json);
    const attempts = (options.retry ?? method === 'GET') ? (this.#o.maxAttempts ?? 5) : 1;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.#fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
      } catch (error) {
        if (attempt + 1 >= attempts) throw error;
        await this.#sleep(backoffMs(attempt));
        continue;
      }
      if (response.ok) return (response.status === 204 ? undefined : await response.json()) as T;
      const text = await response.text();
      if (RETRYABLE.has(response.status) && attempt + 1 < attempts) {
        const retryAfter = Number(response.headers.get('retry-after'));
        await this.#sleep(backoffMs(attempt, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined));
        continue;
      }
      throw new SluiceApiError(response.status, errorOf(text));
    }
  }

  /**
   * Sends an event through the API. It always carries an id (yours, or a fresh one), so a lost
   * answer is simply sent again: an event stored by an earlier attempt comes back as `duplicate`.
   */
  async sendEvent(input: { type: string; payload: unknown; id?: string; environment?: Environment }): Promise<{ event_id: string; duplicate: boolean }> {
    const id = input.id ?? `cli_${randomUUID()}`;
    try {
      const answer = await this.request<{ event: SluiceEvent }>('POST', '/events', { json: { ...input, id }, retry: true });
      return { event_id: answer.event.id, duplicate: false };
    } catch (error) {
      if (error instanceof SluiceApiError && error.code === 'duplicate_event') return { event_id: String(error.details['original_event_id'] ?? id), duplicate: true };
      throw error;
    }
  }

  getEvent(id: string, environment: Environment = 'production'): Promise<{ event: SluiceEvent; reactions: RunSummary[] }> {
    return this.request('GET', `/events/${encodeURIComponent(id)}`, { query: { environment } });
  }

  /** Every event (newest first), fetched a page at a time as you iterate. */
  events(filter: { environment?: Environment; type?: string; source?: string; pageSize?: number } = {}): AsyncIterable<SluiceEvent> {
    return this.#pages<SluiceEvent>('/events', 'events', { environment: filter.environment, type: filter.type, source: filter.source, limit: filter.pageSize });
  }

  getRun(runId: string, environment: Environment = 'production'): Promise<{ run: Record<string, unknown> & { state: string } }> {
    return this.request('GET', `/runs/${encodeURIComponent(runId)}`, { query: { environment } });
  }

  /** Every run (newest first), fetched a page at a time as you iterate. */
  runs(filter: { environment?: Environment; state?: string; workflowId?: string; pageSize?: number } = {}): AsyncIterable<RunSummary> {
    return this.#pages<RunSummary>('/runs', 'runs', { environment: filter.environment, state: filter.state, workflow_id: filter.workflowId, limit: filter.pageSize });
  }

  /** Continues a failed run from its first incomplete step (completed steps are not run again). */
  resumeRun(runId: string, environment: Environment = 'production'): Promise<{ run: Record<string, unknown> & { state: string } }> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/resume`, { query: { environment } });
  }

  cancelRun(runId: string, environment: Environment = 'production'): Promise<{ run: Record<string, unknown> & { state: string } }> {
    return this.request('POST', `/runs/${encodeURIComponent(runId)}/cancel`, { query: { environment } });
  }

  /**
   * A business replay: a new event with new runs and new effect keys. `sideEffects` is required:
   * `skip` records webhook steps as skipped instead of sending. With an `idempotencyKey` the
   * replay is made once however often it is sent, and is retried on transient failures.
   */
  async replayEvent(id: string, options: { sideEffects: 'skip' | 'run'; idempotencyKey?: string; environment?: Environment }): Promise<SluiceEvent> {
    const answer = await this.request<{ event: SluiceEvent }>('POST', `/events/${encodeURIComponent(id)}/replay`, {
      json: { side_effects: options.sideEffects },
      query: { environment: options.environment },
      ...(options.idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': options.idempotencyKey }, retry: true }),
    });
    return answer.event;
  }

  async *#pages<T>(path: string, field: string, query: Record<string, string | number | undefined>): AsyncIterable<T> {
    let cursor: string | undefined;
    do {
      const page = await this.request<Record<string, unknown> & { next_cursor: string | null }>('GET', path, { query: { ...query, cursor } });
      yield* page[field] as T[];
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  }
}

/** The `error` object of an error answer (or a stand-in when the body is not the API's shape). */
function errorOf(text: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (parsed.error !== null && typeof parsed.error === 'object') return parsed.error as Record<string, unknown>;
  } catch {
    // fall through
  }
  return { code: 'http_error', message: text.slice(0, 200) || 'Sluice answered without a body.' };
}
