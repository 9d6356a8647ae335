// The runtime's client for the hook-runner: typed calls with per-call deadlines, bounded retries on
// UNAVAILABLE (re-resolving the address, so a restarted child is found), Sluice errors on failure.
import { Client, connectivityState, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import {
  isWireTrapKind, loadHookRunnerService, SLUICE_CODE_METADATA_KEY, type HookRunnerMethodName, type HookRunnerMethods,
  type HealthReplyWire, type InvokeOutcome, type InvokeReplyWire,
} from '../../hook-runner/wire.ts';
import { runnerChannel } from './runner-channel.ts';
import { answeredDiskFull, answeredRetryLater, CallWithdrawnError, isServiceError, neverSent, refusesToken, RunnerUnavailableError, timedOutUnsent, toSluiceError, unavailable } from './runner-errors.ts';

/** What a call's deadline is chosen by. */
type CallKind = 'invoke' | 'compile' | 'forget' | 'other';

/** A removal reads the runner's indexes of 30 days of calls whole: millions of keys. */
const DEFAULT_DEADLINES_MS: Readonly<Record<CallKind, number>> = { invoke: 30_000, compile: 30_000, forget: 600_000, other: 10_000 };

/**
 * A fixed target (`127.0.0.1:7878`, `unix:/path`) or a source asked before every attempt, which
 * may wait up to `waitMs` for a runner (re)starting (HookRunnerChild.address).
 */
export type HookRunnerAddress = string | ((waitMs: number) => Promise<string>);

/**
 * How long one call waits in all, across its attempts, for a runner (re)starting (not counting the
 * attempts themselves). Each attempt waited up to this much anew: a runner dying at every start
 * held API calls ~90 s (three attempts), past the 60 s after which clients and proxies give up,
 * and a message that said 30 s.
 */
export const RUNNER_WAIT_MS = 30_000;

/** Less of the runner wait than this left is none: no runner starts that fast (and timers end up to a millisecond early). */
const LEAST_RUNNER_WAIT_MS = 100;

export interface HookRunnerClientOptions {
  /** Deadline per attempt. Defaults: invoke 30 s, compile 30 s, forget (ForgetOrg) 10 min, everything else 10 s. */
  readonly deadlinesMs?: Partial<Record<CallKind, number>>;
  /** Attempts per call when the runner is UNAVAILABLE (default 3), waiting `retryDelayMs(attempt)` between. */
  readonly attempts?: number;
  /** How long one call waits in all for a runner (re)starting (default RUNNER_WAIT_MS). */
  readonly runnerWaitMs?: number;
  readonly retryDelayMs?: (attempt: number) => number;
  /** Injected for tests; defaults to a real timer. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Told each time the runner refuses the token (a deployment fault the operator must hear of). */
  readonly onTokenRefused?: () => void;
  /** Reach the runner over TLS, checking its certificate against this CA (PEM); default plaintext. */
  readonly tlsCa?: Buffer;
  /** Told each time a call fails in the TLS handshake, with grpc-js's reason (an operator's fault to log). */
  readonly onTlsFailed?: (details: string) => void;
  /**
   * Told each time a call gives up on a runner it could not reach or lost mid-call (not a TLS
   * failure: onTlsFailed), with grpc-js's reason, which names the address (an operator's line).
   */
  readonly onUnreachable?: (details: string) => void;
}

export interface InvokeInput {
  readonly orgId: string;
  readonly actionId: string;
  readonly digest: string;
  readonly permissions: readonly string[];
  readonly payloadJson: string;
  /** `<runId>:<stepId>`; required unless `simulate`. */
  readonly idempotencyKey: string;
  /** The step attempt's fence (>= 1); ignored when `simulate`. */
  readonly fence: bigint | number;
  readonly simulate?: boolean;
  /**
   * Secret keys set for the action through this runtime that the call reads: the runner refuses the
   * call (`secrets_missing_on_runner`, nothing run) when its vault lost one (actions/required-secrets.ts).
   */
  readonly requiredSecretKeys?: readonly string[];
  /**
   * Aborted when the caller no longer wants the answer (its run left the attempt): the call is
   * cancelled, and the runner drops it unrun if its guest has not started (CallWithdrawnError).
   */
  readonly signal?: AbortSignal;
}

export type { InvokeOutcome } from '../../hook-runner/wire.ts';

export interface InvokeResult {
  readonly outcome: InvokeOutcome;
  readonly fuelUsed: number;
  /** The runner answered from an earlier execution of the same idempotency key. */
  readonly replayed: boolean;
}

/**
 * Why the runner could not be reached, as a tenant may read it (run errors, API answers): grpc-js's
 * own text names the runner's address (`connect ECONNREFUSED 10.0.3.7:7878`), an internal detail
 * that stays in the error's cause. The runtime's own reasons (a child still restarting) are kept.
 */
export function unreachableReason(error: unknown): string {
  if (!isServiceError(error)) return error instanceof Error ? error.message : String(error);
  // The runner's own answer (its code rides in metadata: a sandbox that cannot run) says what is wrong.
  if ((error.metadata?.get(SLUICE_CODE_METADATA_KEY) ?? []).length > 0) return error.details;
  if (failedTls(error)) return 'its TLS certificate was not accepted, or it does not serve TLS (the runtime logs why)';
  return neverSent(error) ? 'no connection to it could be made' : 'the connection to it failed during the call';
}

/** Whether a call failed in the TLS handshake: a certificate the runtime's --runner-ca does not vouch for, or a runner without TLS. */
export const failedTls = (error: ServiceError): boolean => error.code === status.UNAVAILABLE && /certificate|ssl|tls|handshake/i.test(error.details);

/** What runs a custom action: the client itself, or one that restores a lost module first (actions/module-restore.ts). */
export type ActionInvoker = Pick<HookRunnerClient, 'invoke'>;

export interface SecretRef { readonly orgId: string; readonly actionId: string; readonly key: string }
export interface HealthStatus {
  /** The runner can run guests. */
  readonly ok: boolean;
  readonly version: string;
  readonly uptimeMs: number;
  /** The runner's disk is below its floor: it refuses compiles, secret changes and recorded invocations. */
  readonly diskLow: boolean;
  /** The runner's last pass pruning old invocation records and fences failed (its log says why). */
  readonly pruneFailing: boolean;
}

const MAX_SEND_BYTES = 12 * 1024 * 1024;
const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
const defaultDelay = (attempt: number): number => Math.min(2000, 100 * 2 ** (attempt - 1));
const realSleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

const healthOf = (reply: HealthReplyWire): HealthStatus => ({ ok: reply.ok, version: reply.version, uptimeMs: Number(reply.uptime_ms), diskLow: reply.disk_low, pruneFailing: reply.prune_failing });

export function parseInvokeReply(reply: InvokeReplyWire): InvokeResult {
  const fuelUsed = Number(reply.fuel_used);
  const base = { fuelUsed: Number.isFinite(fuelUsed) ? fuelUsed : 0, replayed: reply.replayed };
  if (reply.outcome === 'output_json' && reply.output_json !== undefined) return { ...base, outcome: { kind: 'output', outputJson: reply.output_json } };
  if (reply.outcome === 'rejected' && reply.rejected) return { ...base, outcome: { kind: 'rejected', reason: reply.rejected.reason } };
  if (reply.outcome === 'trap' && reply.trap) {
    const { kind, message } = reply.trap;
    return { ...base, outcome: { kind: 'trap', trap: isWireTrapKind(kind) ? kind : 'other', message } };
  }
  throw unavailable('The hook-runner answered Invoke without an outcome.', undefined, true);
}

export class HookRunnerClient {
  readonly #address: (waitMs: number) => Promise<string>;
  readonly #metadata = new Metadata();
  readonly #options: HookRunnerClientOptions;
  #channel: { readonly address: string; readonly client: Client } | undefined;
  #closed = false;

  constructor(address: HookRunnerAddress, token: string, options: HookRunnerClientOptions = {}) {
    this.#address = typeof address === 'string' ? () => Promise.resolve(address) : address;
    this.#metadata.set('authorization', `Bearer ${token}`);
    this.#options = options;
  }

  /**
   * Compiles and stores a module for `orgId` (compiles take the runner's compile thread with orgs
   * taking turns; `restore`: sent back for a waiting run, before uploads); resolves with its sha256
   * digest once the bytes are durable.
   */
  async compile(wasm: Uint8Array, orgId = '', restore = false): Promise<string> {
    return (await this.#call('Compile', { wasm, org_id: orgId, restore }, 'compile')).digest;
  }

  /** Runs a module. Same key and fence again answers the stored result (`replayed`). */
  async invoke(input: InvokeInput): Promise<InvokeResult> {
    const reply = await this.#call('Invoke', {
      org_id: input.orgId,
      action_id: input.actionId,
      digest: input.digest,
      permissions: [...input.permissions],
      payload_json: input.payloadJson,
      idempotency_key: input.idempotencyKey,
      fence: input.fence.toString(),
      simulate: input.simulate ?? false,
      required_secret_keys: [...(input.requiredSecretKeys ?? [])],
    }, 'invoke', input.signal);
    return parseInvokeReply(reply);
  }

  /** Resolves after the sealed value is durable in the runner. */
  async putSecret(secret: SecretRef & { readonly value: string }): Promise<void> {
    await this.#call('PutSecret', { org_id: secret.orgId, action_id: secret.actionId, key: secret.key, value: secret.value }, 'other');
  }

  async listSecretKeys(scope: { readonly orgId: string; readonly actionId: string }): Promise<string[]> {
    return (await this.#call('ListSecretKeys', { org_id: scope.orgId, action_id: scope.actionId }, 'other')).keys;
  }

  /** Resolves `true` when the secret existed. */
  async deleteSecret(secret: SecretRef): Promise<boolean> {
    return (await this.#call('DeleteSecret', { org_id: secret.orgId, action_id: secret.actionId, key: secret.key }, 'other')).deleted;
  }

  /**
   * Forgets a deleted org in the runner: its secrets, records of calls, fences and the modules no
   * other org uses go, and its calls are refused from then on. Resolves with how many records this call removed, once that is durable,
   * or undefined from a runner of an earlier release, which has no ForgetOrg. A removal of millions
   * of records takes a while (deadline: `forget`); a call sent again joins it, or answers at once
   * once it is done.
   */
  async forgetOrg(orgId: string, signal?: AbortSignal): Promise<number | undefined> {
    try {
      return Number((await this.#call('ForgetOrg', { org_id: orgId }, 'forget', signal)).records_removed);
    } catch (error) {
      if (isServiceError((error as { cause?: unknown }).cause) && (error as { cause: ServiceError }).cause.code === status.UNIMPLEMENTED) return undefined;
      throw error;
    }
  }

  /**
   * One Health call, not retried: the runner's answer within `deadlineMs`, or undefined for a runner
   * that is down or wedged (stopped, blocked), or refuses this runtime's token.
   */
  async checkHealth(deadlineMs: number): Promise<HealthStatus | undefined> {
    if (this.#closed) return undefined;
    try {
      return healthOf(await this.#unary(this.#clientFor(await this.#address(deadlineMs)), 'Health', {}, deadlineMs));
    } catch (error) {
      if (isServiceError(error) && refusesToken(error)) this.#options.onTokenRefused?.();
      return undefined;
    }
  }

  async health(): Promise<HealthStatus> {
    return healthOf(await this.#call('Health', {}, 'other'));
  }

  close(): void {
    this.#closed = true;
    this.#channel?.client.close();
    this.#channel = undefined;
  }

  async #call<M extends HookRunnerMethodName>(
    method: M,
    request: HookRunnerMethods[M]['request'],
    kind: CallKind,
    signal?: AbortSignal,
  ): Promise<HookRunnerMethods[M]['reply']> {
    const attempts = Math.max(1, this.#options.attempts ?? 3);
    const deadlineMs = this.#options.deadlinesMs?.[kind] ?? DEFAULT_DEADLINES_MS[kind];
    const runnerWaitMs = this.#options.runnerWaitMs ?? RUNNER_WAIT_MS;
    /** Time this call spent waiting for an address (a runner restarting), not in calls. */
    let waitedMs = 0;
    let lastError: unknown;
    let mayHaveRun = false;
    /** The call's end when no attempt got an answer: `what` happened, and why the last one failed. */
    const gaveUp = (what: string): RunnerUnavailableError => {
      if (isServiceError(lastError) && !failedTls(lastError)) this.#options.onUnreachable?.(lastError.details);
      return unavailable(`${what} (${method}): ${unreachableReason(lastError)}`, lastError, mayHaveRun);
    };
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      if (this.#closed) throw unavailable('The hook-runner client is closed.');
      if (isAborted(signal)) throw new CallWithdrawnError(method, mayHaveRun);
      let address: string | undefined;
      const waitStarted = performance.now();
      try {
        address = await this.#address(Math.max(LEAST_RUNNER_WAIT_MS, Math.floor(runnerWaitMs - waitedMs)));
      } catch (error) {
        lastError = error; // e.g. a supervised child that is still restarting
      }
      waitedMs += performance.now() - waitStarted;
      // Withdrawn while the address was awaited (a supervised runner restarting: up to 30 s): not sent.
      if (isAborted(signal)) throw new CallWithdrawnError(method, mayHaveRun);
      if (address !== undefined) {
        const client = this.#clientFor(address);
        // Whether the channel was connected when the signal cancelled the call: if not, it never left.
        let connectedAtCancel = true;
        try {
          return await this.#unary(client, method, request, deadlineMs, signal, () => (connectedAtCancel = client.getChannel().getConnectivityState(false) === connectivityState.READY));
        } catch (error) {
          if (!isServiceError(error)) throw error;
          // Cancelled by its signal: a call that got to the runner may have run there.
          if (isAborted(signal)) throw new CallWithdrawnError(method, mayHaveRun || (connectedAtCancel && !neverSent(error)));
          if (refusesToken(error)) this.#options.onTokenRefused?.();
          if (failedTls(error)) this.#options.onTlsFailed?.(error.details);
          // A runner that refuses (its disk below its floor) after an earlier attempt of this call was
          // lost on the way may have run that one: the caller must not take it as never sent.
          if (answeredDiskFull(error) && mayHaveRun) throw unavailable(`The hook-runner may have taken an earlier attempt of this call (${method}), then refused it: ${error.details}`, error, true);
          // The whole deadline went on a connection that never opened: not tried again (that would
          // spend another deadline), and nothing was sent by this attempt.
          if (timedOutUnsent(error)) {
            this.#options.onUnreachable?.(error.details);
            throw unavailable(`The hook-runner could not be reached within ${deadlineMs} ms (${method}): no connection to it opened (the runtime logs where it tried).`, error, mayHaveRun);
          }
          if (error.code !== status.UNAVAILABLE || answeredDiskFull(error) || answeredRetryLater(error)) throw toSluiceError(method, error);
          mayHaveRun ||= !neverSent(error);
          lastError = error;
        }
      }
      if (attempt === attempts) break;
      // The call has waited for a runner (re)starting as long as it may: not tried again.
      if (runnerWaitMs - waitedMs < LEAST_RUNNER_WAIT_MS) throw gaveUp(`The hook-runner did not become ready within ${runnerWaitMs} ms, over ${attempt} attempt${attempt === 1 ? '' : 's'}`);
      await (this.#options.sleep ?? realSleep)((this.#options.retryDelayMs ?? defaultDelay)(attempt));
    }
    throw gaveUp(`The hook-runner is unavailable after ${attempts} attempt${attempts === 1 ? '' : 's'}`);
  }

  #clientFor(address: string): Client {
    if (this.#channel?.address === address) return this.#channel.client;
    this.#channel?.client.close();
    const channel = runnerChannel(address, this.#options.tlsCa);
    const client = new Client(address, channel.credentials, {
      ...channel.options,
      'grpc.max_send_message_length': MAX_SEND_BYTES,
      'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
      // A restarted runner on the same address should be reachable within our retry budget.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1000,
    });
    this.#channel = { address, client };
    return client;
  }

  #unary<M extends HookRunnerMethodName>(
    client: Client,
    method: M,
    request: HookRunnerMethods[M]['request'],
    deadlineMs: number,
    signal?: AbortSignal,
    beforeCancel?: () => void,
  ): Promise<HookRunnerMethods[M]['reply']> {
    const definition = loadHookRunnerService()[method];
    return new Promise((resolve, reject) => {
      const cancel = (): void => {
        beforeCancel?.();
        call.cancel();
      };
      const call = client.makeUnaryRequest(
        definition.path,
        definition.requestSerialize,
        definition.responseDeserialize,
        request,
        this.#metadata,
        { deadline: Date.now() + deadlineMs },
        (error: ServiceError | null, reply?: HookRunnerMethods[M]['reply']) => {
          signal?.removeEventListener('abort', cancel);
          if (error !== null) reject(error);
          else if (reply === undefined) reject(unavailable(`The hook-runner sent an empty ${method} reply.`, undefined, true));
          else resolve(reply);
        },
      );
      if (isAborted(signal)) cancel();
      else signal?.addEventListener('abort', cancel, { once: true });
    });
  }
}

/** A function, not an inline test: an abort comes during an await, which TypeScript's narrowing does not see. */
const isAborted = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;
