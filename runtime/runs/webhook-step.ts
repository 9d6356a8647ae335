// Performs one attempt of a webhook step: a signed outbound POST (Standard Webhooks headers, the
// step key as `webhook-id` and `Idempotency-Key`), classified into success, retryable or terminal.

import { createHmac } from 'node:crypto';
import { isIP } from 'node:net';
import { parseRetryAfter } from '../../actors/retry-policy.ts';
import type { StepFailure } from '../../actors/run-types.ts';
import type { JsonValue } from '../../actors/json.ts';
import { decodeStandardSecret } from '../sources/source-record.ts';
import type { OutboundConnections } from './outbound-connections.ts';
import { ForbiddenTargetError, isOwnAddress, isPublicAddress, SelfTargetError } from './webhook-address-policy.ts';
import { postOnce, PostNeverConnectedError, PostRequestError, PostStaleConnectionError, PostTimeoutError, PostWithdrawnError, queuedMsOf, type PostAnswer } from './outbound-post.ts';
import { tlsFailureOf } from './tls-failure.ts';
import { ReceiverLookupError } from './receiver-lookup.ts';

export const EVIDENCE_BODY_CAP = 4096;

export interface WebhookRequest {
  /** The org the run belongs to: each org has its own connection pool per receiver. */
  readonly orgId: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly body: string;
  /** `<runId>:<stepId>`: the same on every attempt. */
  readonly idempotencyKey: string;
  /** The claim's fence and attempt number, sent as `sluice-fence` / `sluice-attempt` for receivers that want them. */
  readonly fence: number;
  readonly attempt: number;
  /**
   * Active signing secrets of the workflow (newest first); every one signs, for rotation. Read when
   * the request leaves, as its timestamp is: one that waited for a connection past a rotation is
   * signed by the secrets of then (the new and the previous), not by those it started with.
   */
  readonly signingSecrets: () => readonly string[];
  readonly nowMs: number;
  /** Asked before the request is written (it may wait for a connection): false leaves it unsent. */
  readonly stillWanted?: () => boolean;
  /** Aborted once the run leaves the attempt: a request waiting for a connection is dropped at once (PostOptions.withdrawn). */
  readonly withdrawn?: () => AbortSignal;
  /** Asked just before the request is written; false drops it unsent (PostOptions.goingOut). */
  readonly goingOut?: () => boolean;
  /** Told of a body still being sent after the answer came, and when that ends (PostOptions.stillSending). */
  readonly stillSending?: (ended: Promise<void>) => void;
}

/** `sentAt`: when the request got its connection, on the attempt's clock; absent when it was never sent. */
export type WebhookOutcome =
  | { readonly ok: true; readonly result: JsonValue; readonly evidence: JsonValue; readonly sentAt: number }
  | { readonly ok: false; readonly error: StepFailure; readonly evidence: JsonValue; readonly sentAt?: number };

export interface WebhookTarget {
  /** The runtime's own listener, which webhook steps may never call. */
  readonly selfPort: number;
  readonly connections: OutboundConnections;
  /**
   * Milliseconds on a clock that only counts time passing, for an attempt's `duration_ms` and
   * `queued_ms`; default performance.now (a test passes its mocked Date's). On the wall clock, an
   * NTP step during a request recorded an hour for a receiver that took 2 s.
   */
  readonly elapsedNow?: () => number;
}

const LOOPBACK_NAMES = new Set(['localhost', 'localhost.localdomain', 'ip6-localhost']);
const SELF_REFUSED = 'Webhook steps may not call the Sluice runtime itself.';

/** A URL's host as an address literal would be written: IPv6 without its brackets. */
const hostOf = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '');

/**
 * True when the URL names this runtime's own listener by a loopback name or an address of this
 * machine. A name is checked where the connection resolves it (webhook-address-policy.ts,
 * connectionLookup), under the step's deadline, with the answer it connects to.
 */
export function targetsSelf(url: URL, selfPort: number): boolean {
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (port !== selfPort) return false;
  const host = hostOf(url);
  if (LOOPBACK_NAMES.has(host.toLowerCase())) return true;
  return isIP(host) !== 0 && isOwnAddress(host);
}

export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets
    .map((secret) => `v1,${createHmac('sha256', decodeStandardSecret(secret) ?? Buffer.alloc(0)).update(`${id}.${timestamp}.${body}`).digest('base64')}`)
    .join(' ');
}

const failure = (code: string, message: string, retryable: boolean, evidence: JsonValue, sentAt?: number, retryAfterMs?: number): WebhookOutcome => ({
  ok: false,
  error: retryAfterMs === undefined ? { code, message, retryable } : { code, message, retryable, retryAfterMs },
  evidence,
  ...(sentAt === undefined ? {} : { sentAt }),
});

/** `queued_ms`, only when the attempt waited for a connection (its pool was at its cap). */
const queuedEvidence = (queuedMs: number | undefined): { queued_ms?: number } => (queuedMs === undefined ? {} : { queued_ms: Math.round(queuedMs) });

/**
 * An attempt's `duration_ms`: its time from when it had a connection (its `started_at`), so that a
 * receiver is not blamed for the wait for one, which `queued_ms` tells apart; `elapsedMs` since the
 * attempt began, on the clock that wait is measured on (outbound-post.ts).
 */
const durationAfterWait = (elapsedMs: number, queuedMs: number | undefined): number => Math.max(0, Math.round(elapsedMs - (queuedMs ?? 0)));

/** Errors of the process running out of file descriptors (its own, or the system's). */
const OUT_OF_DESCRIPTORS = new Set(['EMFILE', 'ENFILE']);

/**
 * Errors that come before any connection exists (the receiver refused it, or its name has no
 * address): nothing was sent. Errors on a connection (a reset, a broken pipe) may come after the
 * request went out, so they are not among them.
 */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/** Sends one attempt. Never throws: every failure is classified as retryable or not. */
export async function sendWebhook(request: WebhookRequest, target: WebhookTarget): Promise<WebhookOutcome> {
  const url = new URL(request.url);
  const base = { url: url.origin + url.pathname, idempotency_key: request.idempotencyKey };
  if (targetsSelf(url, target.selfPort)) return failure('self_request_refused', SELF_REFUSED, false, base);
  // A name is checked where it connects (the pools' lookup); an address literal connects without one.
  const literal = hostOf(url);
  if (target.connections.targets === 'public' && isIP(literal) !== 0 && !isPublicAddress(literal)) {
    return failure('webhook_target_forbidden', `${literal} is not a public address (--webhook-targets public).`, false, base);
  }
  const headers: Record<string, string> = {
    // A default: a step's own User-Agent (any case) replaces it.
    'user-agent': 'Sluice-Webhooks/1',
    ...request.headers,
    'content-type': 'application/json',
    'webhook-id': request.idempotencyKey,
    'idempotency-key': request.idempotencyKey,
    'sluice-fence': String(request.fence),
    'sluice-attempt': String(request.attempt),
  };
  // Signed when the request leaves, not when it joins the pool's queue: receivers refuse a
  // timestamp more than 5 minutes old, and a queue behind a slow receiver can be that long.
  const signedAtSend = (waitedMs: number): Record<string, string> => {
    const timestamp = Math.floor((request.nowMs + waitedMs) / 1000);
    return {
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(request.signingSecrets(), request.idempotencyKey, timestamp, request.body),
    };
  };
  const elapsedNow = target.elapsedNow ?? (() => performance.now());
  const started = elapsedNow();
  let answer: PostAnswer;
  try {
    answer = await postOnce(url, {
      headers,
      headersAtSend: signedAtSend,
      body: request.body,
      timeoutMs: request.timeoutMs,
      keepBytes: EVIDENCE_BODY_CAP,
      readLimitBytes: 16 * EVIDENCE_BODY_CAP,
      pool: target.connections.pool(url, request.orgId),
      elapsedNow,
      ...(request.stillWanted === undefined ? {} : { stillWanted: request.stillWanted }),
      ...(request.withdrawn === undefined ? {} : { withdrawn: request.withdrawn }),
      ...(request.stillSending === undefined ? {} : { stillSending: request.stillSending }),
      ...(request.goingOut === undefined ? {} : { goingOut: request.goingOut }),
    });
  } catch (error) {
    // A request that waited for a connection was sent (if at all) only once it had one.
    const queuedMs = queuedMsOf(error);
    const sentAt = request.nowMs + (queuedMs ?? 0);
    const evidence = { ...base, duration_ms: durationAfterWait(elapsedNow() - started, queuedMs), ...queuedEvidence(queuedMs) };
    // A timeout once the connection was open means the request went out; a network error may have
    // come at any point, so the attempt's own time stands for it.
    if (error instanceof PostRequestError) return failure('webhook_request_invalid', `The request could not be sent as configured: ${error.message}.`, false, evidence);
    // Refused in the connection's lookup: before it opened.
    const beforeConnecting = error instanceof PostNeverConnectedError ? error.cause : error;
    if (beforeConnecting instanceof ForbiddenTargetError) return failure('webhook_target_forbidden', `${beforeConnecting.message}.`, false, evidence);
    if (beforeConnecting instanceof SelfTargetError) return failure('self_request_refused', SELF_REFUSED, false, evidence);
    // Nothing was sent: the report only says so (it reaches a cancelled run's record, or nothing).
    if (error instanceof PostWithdrawnError) {
      return failure('webhook_withdrawn', 'Not sent: the run left this attempt (cancelled or deleted) before the request went out (while it waited for a connection, or while its connection opened).', false, evidence);
    }
    const code = (error as NodeJS.ErrnoException).code ?? '';
    // Sluice's own shortage, not the receiver's: named so, or triage would blame a healthy receiver.
    if (OUT_OF_DESCRIPTORS.has(code)) {
      return failure('sluice_out_of_file_descriptors', `The request was not sent: the Sluice process is out of file descriptors (${code}; raise its limit, ulimit -n). The receiver was not reached.`, true, evidence);
    }
    // A handshake refused (a certificate, no shared TLS version, plain HTTP at an https url): nothing went out.
    const tls = error instanceof PostNeverConnectedError ? tlsFailureOf(error.cause) : undefined;
    if (tls !== undefined) return failure('webhook_tls_error', `Nothing was sent: ${tls.cause}.`, true, { ...evidence, tls_error: tls.code });
    // The nameservers never answered and the resolver stopped waiting before the step's deadline
    // did: the same cause as a deadline that passed during the lookup, so the same code.
    const lookup = error instanceof PostNeverConnectedError ? error.cause : error;
    if (lookup instanceof ReceiverLookupError && lookup.unanswered) {
      return failure('webhook_dns_timeout', `The receiver's name (${hostOf(url)}) did not resolve: its nameservers did not answer, and the resolver stopped waiting before the step's ${request.timeoutMs} ms had passed. Nothing was sent; the receiver was not reached.`, true, evidence);
    }
    // No connection: the attempt never started (no started_at), so the run view does not say the receiver got it.
    if (error instanceof PostNeverConnectedError || NEVER_CONNECTED.has(code)) {
      return failure('webhook_network_error', `The request was not sent: ${(error as Error).message}. The receiver was not reached.`, true, evidence);
    }
    // Most often the receiver closed the connection as idle just as the request went out on it: a
    // retry soon, not after the step's backoff (the retry is an attempt of its own, under the policy).
    if (error instanceof PostStaleConnectionError) {
      return failure('webhook_connection_closed', `The receiver closed its kept-alive connection before answering this request (${error.message}); if the step has retries left, the next comes after the shortest wait, not the step's backoff.`, true, evidence, sentAt, 0);
    }
    // A deadline that passed before the connection was open sent nothing (no started_at).
    if (error instanceof PostTimeoutError && error.phase === 'lookup') {
      return failure('webhook_dns_timeout', `The receiver's name did not resolve within ${request.timeoutMs} ms. Nothing was sent; the receiver was not reached.`, true, evidence);
    }
    if (error instanceof PostTimeoutError && error.phase === 'connect') {
      return failure('webhook_connect_timeout', `No connection to the receiver opened within ${request.timeoutMs} ms. Nothing was sent; the receiver was not reached.`, true, evidence);
    }
    // A TLS 1.3 receiver refuses the client (no client certificate) once the request is on its way.
    const lateTls = tlsFailureOf(error);
    if (lateTls !== undefined) return failure('webhook_tls_error', `The receiver ended the TLS connection as the request went out: ${lateTls.cause}.`, true, { ...evidence, tls_error: lateTls.code }, sentAt);
    return error instanceof PostTimeoutError
      ? failure('webhook_timeout', `The receiver did not answer within ${request.timeoutMs} ms.`, true, evidence, sentAt)
      : failure('webhook_network_error', `The request failed: ${error instanceof Error ? error.message : String(error)}.`, true, evidence, sentAt);
  }
  const sentAt = request.nowMs + (answer.queuedMs ?? 0);
  const answeredAfterMs = elapsedNow() - started;
  const { status } = answer;
  const evidence = {
    ...base,
    status,
    duration_ms: durationAfterWait(answeredAfterMs, answer.queuedMs),
    ...queuedEvidence(answer.queuedMs),
    body: answer.text,
    body_bytes: answer.bytes,
    body_truncated: answer.bytes > EVIDENCE_BODY_CAP || answer.cutOff,
    ...(answer.cutOff ? { body_cut_off: true } : {}),
  };
  if (status >= 200 && status < 300) return { ok: true, result: { status, body: answer.text }, evidence, sentAt };
  // An HTTP-date counts from the answer, on the attempt's clock: the run adds the delay to the
  // report's time, so counting from the attempt's start would add the request's duration twice.
  const retryAfterMs = parseRetryAfter(answer.retryAfter, request.nowMs + answeredAfterMs);
  if (status === 429 || (status >= 500 && status <= 599)) return failure(`webhook_http_${status}`, `The receiver answered ${status}.`, true, evidence, sentAt, retryAfterMs);
  return failure(`webhook_http_${status}`, `The receiver answered ${status}; not retried.`, false, evidence, sentAt);
}
