// The REST side of the TypeScript client, bound to one organization: send events (safe to retry:
// each carries an id), read events and runs page by page, resume, cancel and replay runs, and any
// other endpoint through `request`. Each attempt has a timeout, and a signal cancels a call at once.

import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { linkSignals, raceAbort } from './abort.ts';
import { answerText, MAX_ANSWER_BYTES } from './answer-body.ts';
import { SluiceApiError, SluiceNetworkError } from './api-errors.ts';
import type { Environment, EventDetails, FailedEvent, ReplayMade, Run, RunSummary, SluiceEvent } from './api-types.ts';
import { credentialAsSent, headerCredentialProblem } from './credential-check.ts';
import { checkedHeaders, idempotencyKeyHeader, pathId } from './request-arguments.ts';
import { parseBaseUrl, refuseUrlCredentials, urlUnder } from './endpoint-url.ts';
import { answeredWithoutTls, isSluiceLiveness, mayBePlainHttp, PLAIN_HTTP_CHECK_MS, plainHealthzOf, plainHttpHint } from './plain-http-hint.ts';
import { backoffMs, MAX_RETRY_AFTER_MS, realSleep, RETRIED_STATUSES, retryAfterMsOf, type Sleep } from './retry.ts';
import { checkTimerDuration } from './timer-duration.ts';
import { checkCount } from './count-option.ts';
import { describeRefusalBody, sluiceErrorIn } from './refusal-body.ts';

export interface ClientOptions {
  /** Where Sluice listens, e.g. http://127.0.0.1:8787 or, behind a proxy, https://host/sluice/. */
  readonly url: string;
  readonly apiKey: string;
  readonly org: string;
  /** Attempts of a request that is safe to repeat, the first included (default 5, at most 100). */
  readonly maxAttempts?: number;
  /** How long one attempt may take, its answer's body included, before it counts as a network failure (default 30,000). */
  readonly timeoutMs?: number;
  /** Cancels every call of this client once it aborts (see CallOptions.signal). */
  readonly signal?: AbortSignal;
  readonly fetch?: typeof fetch;
  readonly sleep?: Sleep;
  /** Told before each wait to try a call again (a CLI says so on stderr: a silent server otherwise looks like a hang). */
  readonly onRetry?: (retry: RetryNotice) => void;
}

/** A call about to be tried again: why its attempt failed, which attempt that was, and the wait before the next. */
export interface RetryNotice {
  readonly what: string;
  readonly reason: string;
  readonly attempt: number;
  readonly attempts: number;
  readonly waitMs: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Cancels the call at once, a wait between attempts too: it rejects with the signal's reason and is not retried. */
  readonly signal?: AbortSignal;
  /** This call's per-attempt timeout, instead of the client's. */
  readonly timeoutMs?: number;
}

export interface RequestOptions extends CallOptions {
  readonly json?: unknown;
  /** A multipart body instead (an action's module upload, action-upload.ts); fetch sets its content type. */
  readonly form?: FormData;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly headers?: Readonly<Record<string, string>>;
  /** Repeat on a network error, a timeout, 429, 502, 503 or 504 (default: only for GET). Only for requests safe to repeat. */
  readonly retry?: boolean;
  /** A member Sluice's answer holds (an object, or an array): an answer without it is `invalid_answer`. */
  readonly expect?: string;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_ATTEMPTS = 100;

type Attempt =
  | { readonly kind: 'answered'; readonly status: number; readonly headers: Headers; readonly text: string }
  | { readonly kind: 'too_large'; readonly status: number }
  | { readonly kind: 'failed'; readonly timedOut: boolean; readonly error: unknown };

export class SluiceClient {
  readonly org: string;
  readonly #o: ClientOptions;
  readonly #base: URL;
  readonly #fetch: typeof fetch;
  readonly #sleep: Sleep;
  /** The key as sent: without the white space around it. */
  readonly #apiKey: string;

  /** Throws TypeError for a url that is not http(s) or carries credentials or a query, an API key a header cannot carry, or an empty or "." org; RangeError for a bad timeoutMs or maxAttempts. */
  constructor(options: ClientOptions) {
    this.#o = options;
    this.org = options.org;
    pathId('The organization id', options.org);
    this.#base = parseBaseUrl(options.url);
    refuseUrlCredentials(this.#base);
    // Only what is sent is checked: without the white space at its ends.
    this.#apiKey = credentialAsSent('The API key', 'apiKey', options.apiKey);
    const problem = headerCredentialProblem('The API key', this.#apiKey);
    if (problem !== undefined) throw new TypeError(problem);
    this.#fetch = options.fetch ?? fetch;
    this.#sleep = options.sleep ?? realSleep;
    checkTimeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    checkCount('maxAttempts', options.maxAttempts ?? 5, 1, MAX_ATTEMPTS);
  }

  /**
   * Calls `method path` under /organizations/:org (a path starting with `//` is taken from Sluice's
   * root instead; both under the url's own path) and resolves with the parsed JSON answer
   * (undefined for 204). Rejects with SluiceApiError, SluiceNetworkError, or the signal's reason.
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return (await this.requestWithHeaders<T>(method, path, options)).body;
  }

  /**
   * As `request`, with the answer's status and headers too: a record's `ETag`, to send back as
   * `If-Match` on its PATCH (a change made meanwhile is then `412 etag_mismatch`, not overwritten).
   */
  async requestWithHeaders<T>(method: string, path: string, options: RequestOptions = {}): Promise<{ status: number; headers: Headers; body: T }> {
    const { status, headers, text, what } = await this.#succeed(method, path, options);
    // A call that expects an answer is never content with none: a 204 where Sluice answers a body is not Sluice's.
    const body = (status === 204 && options.expect === undefined ? undefined : answerOf(status, text, what, options.expect)) as T;
    return { status, headers, body };
  }

  /** The 2xx answer to `method path` as text (retried and refused as `request` is). */
  async #succeed(method: string, path: string, options: RequestOptions): Promise<{ status: number; headers: Headers; text: string; what: string }> {
    const relative = path.startsWith('//') ? path.slice(1) : `/organizations/${encodeURIComponent(this.org)}/${path.replace(/^\/+/, '')}`;
    const url = urlUnder(this.#base, relative, 'http');
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const headers: Record<string, string> = { authorization: `Bearer ${this.#apiKey}`, ...checkedHeaders(options.headers) };
    if (options.json !== undefined) headers['content-type'] = 'application/json';
    const body = options.form ?? (options.json === undefined ? undefined : JSON.stringify(options.json));
    const init: RequestInit = { method, headers, ...(body === undefined ? {} : { body }) };
    const attempts = (options.retry ?? method === 'GET') ? (this.#o.maxAttempts ?? 5) : 1;
    const timeoutMs = checkTimeout(options.timeoutMs ?? this.#o.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const cancel = linkSignals([this.#o.signal, options.signal]);
    try {
      for (let attempt = 0; ; attempt++) {
        const outcome = await this.#attempt(url, init, cancel.signal, timeoutMs);
        if (outcome.kind === 'failed') {
          // A TLS handshake with a plain-HTTP server fails the same way every time (and takes ~10 s): not retried.
          const last = attempt + 1 >= attempts || (!outcome.timedOut && answeredWithoutTls(url, failureText(outcome.error)));
          const plain = !last && attempt === 0 && mayBePlainHttp(url, failureText(outcome.error), outcome.timedOut) ? await this.#answeredInPlainHttp(url, cancel.signal) : undefined;
          if (last || plain !== undefined) throw networkError(method, url, outcome, timeoutMs, attempt + 1, plain);
          const waitMs = backoffMs(attempt);
          this.#told(method, url, outcome.timedOut ? `no answer within ${timeoutMs} ms` : reasonOf(outcome.error), attempt, attempts, waitMs);
          await raceAbort(this.#sleep(waitMs, cancel.signal), cancel.signal);
          continue;
        }
        // Not Sluice's answer, and as large again on a retry: said at once.
        if (outcome.kind === 'too_large') {
          throw new SluiceApiError(outcome.status, { code: 'invalid_answer', message: `${method} ${url.pathname} answered ${outcome.status} with a body larger than ${MAX_ANSWER_BYTES / (1024 * 1024)} MiB, which no Sluice answer is (not read): is the url where Sluice listens?` });
        }
        if (outcome.status >= 200 && outcome.status < 300) return { status: outcome.status, headers: outcome.headers, text: outcome.text, what: `${method} ${url.pathname}` };
        const retryAfterMs = retryAfterMsOf(outcome.headers.get('retry-after'));
        // A longer hint (a proxy's maintenance page, say) gets the answer thrown, its hint in `retryAfterMs`: a call should not hang for hours unseen.
        if (RETRIED_STATUSES.has(outcome.status) && attempt + 1 < attempts && !(retryAfterMs !== undefined && retryAfterMs > MAX_RETRY_AFTER_MS)) {
          const waitMs = backoffMs(attempt, retryAfterMs);
          this.#told(method, url, `answered ${outcome.status}`, attempt, attempts, waitMs);
          await raceAbort(this.#sleep(waitMs, cancel.signal), cancel.signal);
          continue;
        }
        throw new SluiceApiError(outcome.status, errorOf(outcome.status, outcome.text, `${method} ${url.pathname}`), retryAfterMs);
      }
    } finally {
      cancel.release();
    }
  }

  /** Tells `onRetry` (if given) of the retry about to be waited for; what it throws is not the call's failure. */
  #told(method: string, url: URL, reason: string, attempt: number, attempts: number, waitMs: number): void {
    const warn = (error: unknown): void => process.emitWarning(`Sluice client onRetry threw: ${error instanceof Error ? error.message : String(error)}`);
    try {
      // An async callback's rejection is a warning too, never an unhandled rejection.
      const told: unknown = this.#o.onRetry?.({ what: `${method} ${url.pathname}`, reason, attempt: attempt + 1, attempts, waitMs });
      if (told instanceof Promise) told.catch(warn);
    } catch (error) {
      warn(error);
    }
  }

  /**
   * Sluice's liveness URL under the base, asked in plain HTTP on the https url's port: its own
   * answer (200 `{"status":"ok"}`) means the server speaks plain HTTP; undefined otherwise.
   */
  async #answeredInPlainHttp(url: URL, cancel: AbortSignal): Promise<URL | undefined> {
    const healthz = plainHealthzOf(this.#base, url.port);
    const answer = await this.#attempt(healthz, { method: 'GET' }, cancel, PLAIN_HTTP_CHECK_MS);
    return answer.kind === 'answered' && isSluiceLiveness(answer.status, answer.text) ? healthz : undefined;
  }

  /** One attempt, answer body included, within `timeoutMs`; throws only the caller's abort reason. */
  async #attempt(url: URL, init: RequestInit, cancel: AbortSignal, timeoutMs: number): Promise<Attempt> {
    const attempt = linkSignals([cancel]);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.abort(new Error('timed out'));
    }, timeoutMs);
    try {
      const response = await raceAbort(this.#fetch(url, { ...init, signal: attempt.signal }), attempt.signal);
      const text = await raceAbort(answerText(response), attempt.signal);
      return text === undefined ? { kind: 'too_large', status: response.status } : { kind: 'answered', status: response.status, headers: response.headers, text };
    } catch (error) {
      if (cancel.aborted) throw cancel.reason;
      return { kind: 'failed', timedOut, error };
    } finally {
      clearTimeout(timer);
      attempt.release();
    }
  }

  /**
   * Sends an event through the API. It always carries an id (yours, or a fresh one), so a lost
   * answer is simply sent again: the same event stored by an earlier attempt (or an earlier call)
   * comes back as `duplicate`. An id that another event holds (another type, payload or
   * environment) is no duplicate: that `409 duplicate_event` is thrown.
   */
  async sendEvent(input: { type: string; payload: unknown; id?: string; environment?: Environment }, call: CallOptions = {}): Promise<{ event_id: string; duplicate: boolean }> {
    const id = input.id ?? `cli_${randomUUID()}`;
    try {
      const answer = await this.request<{ event: SluiceEvent }>('POST', '/events', { ...call, json: { ...input, id }, retry: true, expect: 'event' });
      return { event_id: answer.event.id, duplicate: false };
    } catch (error) {
      if (error instanceof SluiceApiError && error.code === 'duplicate_event' && (await this.#holdsSameEvent(id, input, call))) return { event_id: id, duplicate: true };
      throw error;
    }
  }

  /** Whether the event stored under `id` is the one `input` describes (its type, environment and payload). */
  async #holdsSameEvent(id: string, input: { type: string; payload: unknown; environment?: Environment }, call: CallOptions): Promise<boolean> {
    let stored: SluiceEvent;
    try {
      stored = (await this.getEvent(id, input.environment ?? 'production', call)).event;
    } catch {
      return false; // Not in this environment, or not readable now: not known to be this event.
    }
    // As sent: the payload went out as JSON text (undefined members dropped, and so on).
    const sent: unknown = JSON.parse(JSON.stringify(input.payload ?? null));
    return stored.type === input.type && isDeepStrictEqual(stored.payload, sent);
  }

  getEvent(id: string, environment: Environment = 'production', call: CallOptions = {}): Promise<EventDetails> {
    return this.request('GET', `/events/${pathId('The event id', id)}`, { ...call, query: { environment }, expect: 'event' });
  }

  /** Every event (newest first), fetched a page at a time as you iterate. */
  events(filter: { environment?: Environment; type?: string; source?: string; pageSize?: number } = {}, call: CallOptions = {}): AsyncIterable<SluiceEvent> {
    return this.#pages<SluiceEvent>('/events', 'events', { environment: filter.environment, type: filter.type, source: filter.source, limit: filter.pageSize }, call);
  }

  /** Every event with failed runs (newest first by arrival), a page at a time as you iterate: triage. */
  failedEvents(filter: { environment?: Environment; pageSize?: number } = {}, call: CallOptions = {}): AsyncIterable<FailedEvent> {
    return this.#pages<FailedEvent>('/failed-events', 'failed_events', { environment: filter.environment, limit: filter.pageSize }, call);
  }

  getRun(runId: string, environment: Environment = 'production', call: CallOptions = {}): Promise<{ run: Run }> {
    return this.request('GET', `/runs/${pathId('The run id', runId)}`, { ...call, query: { environment }, expect: 'run' });
  }

  /** Every run (newest first), fetched a page at a time as you iterate. */
  runs(filter: { environment?: Environment; state?: string; workflowId?: string; pageSize?: number } = {}, call: CallOptions = {}): AsyncIterable<RunSummary> {
    return this.#pages<RunSummary>('/runs', 'runs', { environment: filter.environment, state: filter.state, workflow_id: filter.workflowId, limit: filter.pageSize }, call);
  }

  /** Continues a failed run from its first incomplete step (completed steps are not run again). */
  resumeRun(runId: string, environment: Environment = 'production', call: CallOptions = {}): Promise<{ run: Run }> {
    return this.request('POST', `/runs/${pathId('The run id', runId)}/resume`, { ...call, query: { environment }, expect: 'run' });
  }

  cancelRun(runId: string, environment: Environment = 'production', call: CallOptions = {}): Promise<{ run: Run }> {
    return this.request('POST', `/runs/${pathId('The run id', runId)}/cancel`, { ...call, query: { environment }, expect: 'run' });
  }

  /**
   * A business replay: a new event with new runs and new effect keys. `sideEffects` is required:
   * `skip` records webhook steps as skipped instead of sending. With an `idempotencyKey` the
   * replay is made once however often it is sent, and is retried on transient failures. Without
   * one, the same replay made again within 5 minutes is refused (`409 replay_just_made`, naming
   * it) unless `again` is true. Answers the new event and the runs it started.
   */
  replayEvent(id: string, options: { sideEffects: 'skip' | 'run'; workflowIds?: readonly string[]; idempotencyKey?: string; again?: boolean; environment?: Environment }, call: CallOptions = {}): Promise<ReplayMade> {
    return this.request<ReplayMade>('POST', `/events/${pathId('The event id', id)}/replay`, {
      ...call,
      json: { side_effects: options.sideEffects, ...(options.workflowIds === undefined ? {} : { workflow_ids: options.workflowIds }), ...(options.again === undefined ? {} : { again: options.again }) },
      query: { environment: options.environment },
      expect: 'event',
      ...(options.idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': idempotencyKeyHeader(options.idempotencyKey) }, retry: true }),
    });
  }

  /**
   * The organization's export (admin role), a page at a time as you iterate: each page's JSON lines
   * as sent (received payloads in their exact text), and `next`, the cursor of the page after it
   * (null on the last page, whose final line is `{"kind":"end"}`): after a failure, pass the last
   * `next` you saw as `cursor` to go on from there. Pages' `more` lines are read, not handed out.
   */
  async *exportPages(options: { cursor?: string; pageSize?: number } = {}, call: CallOptions = {}): AsyncIterable<{ lines: string[]; next: string | null }> {
    let cursor = options.cursor;
    const seen = new Set<string>(cursor === undefined ? [] : [cursor]);
    for (;;) {
      const { text, what } = await this.#succeed('GET', '/export', { ...call, query: { limit: options.pageSize, cursor } });
      const lines = text.split('\n');
      if (lines.at(-1) === '') lines.pop();
      const trailer = exportTrailerOf(lines.at(-1), what);
      if (trailer.kind === 'end') {
        yield { lines, next: null };
        return;
      }
      cursor = firstTimeCursor(seen, trailer.next_cursor, `${what} named a page already read as the next one: the export would not move on.`);
      yield { lines: lines.slice(0, -1), next: cursor };
    }
  }

  async *#pages<T>(path: string, field: string, query: Record<string, string | number | undefined>, call: CallOptions): AsyncIterable<T> {
    let cursor: string | undefined;
    const seen = new Set<string>();
    for (;;) {
      const page = await this.request<Record<string, unknown> & { next_cursor: string | null }>('GET', path, { ...call, query: { ...query, cursor } });
      const items = page?.[field];
      if (!Array.isArray(items)) throw new SluiceApiError(200, { code: 'invalid_answer', message: `GET ${path} answered with JSON whose "${field}" is not a list: is the url where Sluice listens?` });
      yield* items as T[];
      if (page.next_cursor === null || page.next_cursor === undefined) return;
      cursor = firstTimeCursor(seen, page.next_cursor, `GET ${path} named a page already read as the next one: the list would not end.`);
    }
  }
}

/**
 * `cursor`, the next page's, noted in `seen`; `invalid_answer` (`message`) when a page read already
 * had it: a server, or a cache in front that drops the query, naming one again would have the pages
 * asked for without end, printing nothing.
 */
function firstTimeCursor(seen: Set<string>, cursor: string, message: string): string {
  if (seen.has(cursor)) throw new SluiceApiError(200, { code: 'invalid_answer', message });
  seen.add(cursor);
  return cursor;
}

/** The last line of an export page: where the next starts, or that none does; anything else is not Sluice's answer. */
function exportTrailerOf(line: string | undefined, what: string): { kind: 'end' } | { kind: 'more'; next_cursor: string } {
  let trailer: unknown;
  try {
    trailer = JSON.parse(line ?? '');
  } catch {
    // the error below
  }
  const { kind, next_cursor: next } = (typeof trailer === 'object' && trailer !== null ? trailer : {}) as { kind?: unknown; next_cursor?: unknown };
  if (kind === 'end') return { kind };
  if (kind === 'more' && typeof next === 'string' && next !== '') return { kind, next_cursor: next };
  throw new SluiceApiError(200, { code: 'invalid_answer', message: `${what} answered without the line that ends an export page: is the url where Sluice listens?` });
}

const checkTimeout = (ms: number): number => checkTimerDuration('timeoutMs', ms);

/**
 * A success's JSON. One that is not JSON (a proxy's login page at the url) is SluiceApiError
 * `invalid_answer`, never quoting the body: JSON.parse's message would, control characters and all.
 */
function answerOf(status: number, text: string, what: string, expect?: string): unknown {
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new SluiceApiError(status, { code: 'invalid_answer', message: `${what} answered ${status} with a body that is not JSON: is the url where Sluice listens, not a proxy's page?` });
  }
  // JSON of another shape (`{}`, `null`) would fail later as a TypeError naming nothing; a POST so
  // answered may have been carried out all the same, by whatever answered.
  const member = expect === undefined || answer === null || typeof answer !== 'object' ? undefined : (answer as Record<string, unknown>)[expect];
  if (expect !== undefined && (member === null || typeof member !== 'object')) {
    throw new SluiceApiError(status, { code: 'invalid_answer', message: `${what} answered ${status} with JSON that is not Sluice's answer (no "${expect}"): is the url where Sluice listens?` });
  }
  // A record without its id (`{"event":{}}`) is no more Sluice's: printed, it read "replay undefined".
  const idKey = expect === undefined ? undefined : ID_OF[expect];
  const id = idKey === undefined ? undefined : (member as Record<string, unknown>)[idKey];
  if (idKey !== undefined && (typeof id !== 'string' || id === '')) {
    throw new SluiceApiError(status, { code: 'invalid_answer', message: `${what} answered ${status} with JSON that is not Sluice's answer (its "${expect}" has no "${idKey}"): is the url where Sluice listens?` });
  }
  return answer;
}

/** The id every record an answer is expected to hold carries, by the answer's member. */
const ID_OF: Readonly<Record<string, string>> = { event: 'id', run: 'run_id' };

/** fetch's failure in words: its message, with its cause's (`fetch failed` alone says little; OpenSSL's end with a line break). */
function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.message + (error.cause instanceof Error ? ` (${error.cause.message.trim()})` : '');
}

/** What a failed attempt's error says, with its cause's code, for plain-http-hint.ts to read. */
function failureText(error: unknown): string {
  const cause = error instanceof Error ? (error.cause as NodeJS.ErrnoException | undefined) : undefined;
  return `${reasonOf(error)} ${cause?.code ?? ''}`;
}

/** The error for the last failed attempt of the call, naming fetch's reason; `plain`: where the server answered in plain HTTP. */
function networkError(method: string, url: URL, failed: Extract<Attempt, { kind: 'failed' }>, timeoutMs: number, attempts: number, plain?: URL): SluiceNetworkError {
  const what = `${method} ${url.href}`;
  const tries = attempts === 1 ? '1 attempt' : `${attempts} attempts`;
  const told = plain === undefined ? undefined : `the server speaks plain HTTP (Sluice answered ${plain.href}): use http:// instead of https://`;
  if (failed.timedOut) return new SluiceNetworkError('timeout', `${what}: no answer within ${timeoutMs} ms (${tries})${told === undefined ? '' : `; ${told}`}.`, attempts);
  const hint = told ?? plainHttpHint(url, failureText(failed.error));
  return new SluiceNetworkError('network_error', `${what}: ${reasonOf(failed.error)} (${tries})${hint === '' ? '' : `; ${hint}`}.`, attempts, failed.error);
}

/** The `error` object of an error answer (or a stand-in when the body is not the API's shape). */
function errorOf(status: number, text: string, what: string): Record<string, unknown> {
  // Not quoted unless it is Sluice's (refusal-body.ts).
  return sluiceErrorIn(text) ?? { code: 'http_error', message: `${what} answered ${status} with ${describeRefusalBody(text)}: is the url where Sluice listens, not a proxy's page?` };
}
