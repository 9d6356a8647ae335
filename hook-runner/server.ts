// The hook-runner gRPC server: opens the store, vault, registry and ledger, binds the service on a
// loopback/unix address with message-size caps, checks the runner token on every call, closes cleanly.
import type { KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { Server, ServerCredentials, ServerInterceptingCall, status, type handleUnaryCall, type Metadata, type ServerInterceptor, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { DEFAULT_MIN_FREE_DISK_MIB, DiskFloor, statfsProbe, type FloorLog, type FreeSpaceProbe } from './disk-floor.ts';
import { createHookRunnerHandlers, type CallState, type HookRunnerHandlers } from './handlers.ts';
import { InvocationLedger } from './invocation-ledger.ts';
import { wallFlooredByElapsed } from './elapsed-bounded-clock.ts';
import { formatAddress, parseListenAddress, reclaimStaleSocket, type ListenAddress } from './listen-address.ts';
import { loadMasterKey, parseMasterKey, refuseKeyTheFileContradicts, retireRotatedKeyFile } from './master-key.ts';
import type { CompileProcessOptions } from './compile-process.ts';
import { ModuleRegistry } from './module-registry.ts';
import { SandboxUnavailableError, sandboxProblem } from './sandbox.ts';
import { DiskFullError, RunnerConfigError, RunnerError, toServerError, unauthenticated } from './runner-error.ts';
import { createTokenCheck, parseRunnerToken } from './runner-token.ts';
import { openRunnerStore, runnerStoreDir, type RunnerStore } from './store.ts';
import { RUNNER_STORE_FORMAT, stampIn, stampRunnerStoreFormat } from './store-format.ts';
import { upgradeRunnerStore } from './store-upgrade.ts';
import { parseThreadPoolSize, sandboxSlotsFor } from './thread-pool.ts';
import { createTenantTurns } from './tenant-turns.ts';
import { SecretVault } from './vault.ts';
import { loadHookRunnerService, type HookRunnerMethodName, type HookRunnerMethods } from './wire.ts';
import { pruneRunnerRecords } from './record-pruning.ts';
import { ForgottenOrgs } from './forgotten-orgs.ts';
import { RecordPruning } from './pruning-schedule.ts';
import { anyOpensUnder, resealUnderCurrentKey, whichOpens, type ResealCounts } from './master-key-rotation.ts';
import { heldBackNote, isLedgerCommitFailure, throttledStrays, UnconfirmedFlushError } from './lmdb-commit-failure.ts';
import { deadlinePassed } from './call-deadline.ts';

/** Compile carries modules up to 8 MiB; the rest of the envelope and protobuf framing fit in the margin. */
export const MAX_RECEIVE_BYTES = 12 * 1024 * 1024;
const MAX_SEND_BYTES = 4 * 1024 * 1024;
const SHUTDOWN_GRACE_MS = 5000;

export interface HookRunnerServerOptions {
  /** `host:port` (port 0 picks a free one) or `unix:/path`. */
  readonly listen: string;
  readonly dataDir: string;
  readonly token: string;
  /** The vault key, or its text (64 hex chars or base64 of 32 bytes); default: the 0600 key file in the store dir. */
  readonly masterKey?: KeyObject | string | undefined;
  /** Earlier vault keys: secrets only these open are sealed again under `masterKey` before serving. */
  readonly previousMasterKeys?: readonly KeyObject[];
  /** Concurrent guest executions; default fits libuv's default pool (see thread-pool.ts). */
  readonly sandboxSlots?: number;
  readonly version?: string;
  readonly now?: () => number;
  /** Time passing, never set back (default performance.now): bounds `now` for record dates and ages (elapsed-bounded-clock.ts). */
  readonly monotonic?: () => number;
  /** Operator log lines (startup, unexpected errors); never receives secret values. */
  readonly log?: (line: string) => void;
  /** Free MiB the store's disk keeps: below it calls that write are refused (disk-floor.ts); default 256, 0 off. */
  readonly minFreeDiskMib?: number;
  /** How the free space is read; default statfs of the store's directory (tests inject theirs). */
  readonly freeDiskSpace?: FreeSpaceProbe;
  /** The compile process's deadline and memory cap per compile (compile-process.ts defaults). */
  readonly compile?: CompileProcessOptions;
  /** Why guests cannot run on this machine (default: the addon's own answer, sandbox.ts); for tests. */
  readonly sandboxProblem?: () => string | undefined;
  /** Prunes old invocation records and fences (record-pruning.ts); tests inject a failing one. */
  readonly pruneRecords?: typeof pruneRunnerRecords;
  /** Serve over TLS with this certificate chain and private key (PEM); default plaintext. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /**
   * Told once, with LMDB's reason, when the store's disk failed a commit's own sync (flush-watch.ts):
   * from then on no write is answered as stored (hook_runner_write_unconfirmed). The command exits
   * at once (exit 1), and a runtime that started it starts it again.
   */
  readonly onStoreFailed?: (cause: string) => void;
}

export interface HookRunnerServer {
  /** The bound address in gRPC form (`127.0.0.1:43123`, `unix:/path`), usable as a client target. */
  readonly address: string;
  /** Stops accepting calls, lets running ones finish (bounded), then closes the store. Idempotent. */
  close(): Promise<void>;
}

function readPackageVersion(): string {
  try {
    const text = readFileSync(new URL('../package.json', import.meta.url), 'utf8');
    const version: unknown = (JSON.parse(text) as { version?: unknown }).version;
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Stack plus the cause chain, for the operator log (guest input never reaches these errors). */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause === undefined ? '' : `\n  caused by: ${describe(error.cause)}`;
  return `${error.stack ?? error.message}${cause}`;
}

/**
 * Seals secrets again under the current key when earlier keys are given; warns about any no key
 * opens. The rotation's line says the earlier keys are no longer needed only when every secret
 * opens under the current key: given a wrong earlier key, it said so, and the operator deleted the
 * right one. (Not refused: secrets lost for good would then refuse every start with earlier keys.)
 */
async function rotateMasterKey(store: RunnerStore, current: KeyObject, previous: readonly KeyObject[], log: (line: string) => void): Promise<ResealCounts> {
  const counts = await resealUnderCurrentKey(store, current, previous);
  const { resealed, unreadable } = counts;
  if (previous.length > 0) {
    const done = unreadable === 0
      ? 'the previous keys are no longer needed once this line appears'
      : `${unreadable} secret(s) open under none of the given keys (is SLUICE_PREVIOUS_MASTER_KEYS the key they were sealed with?): keep every earlier key you have until they do`;
    log(`hook-runner: master key rotation: ${resealed} secret(s) sealed again under the current key; ${done}.`);
  }
  if (unreadable > 0) {
    const opensUnder = previous.length > 0 ? 'open under none of the given master keys' : 'do not open under the current master key (set SLUICE_PREVIOUS_MASTER_KEYS to rotate from an earlier one)';
    log(`hook-runner: warning: ${unreadable} secret(s) ${opensUnder}; reading them fails closed until they are written again.`);
  }
  return counts;
}

type UnaryHandler<M extends HookRunnerMethodName> = handleUnaryCall<HookRunnerMethods[M]['request'], HookRunnerMethods[M]['reply']>;

function createImplementation(handlers: HookRunnerHandlers, log: (line: string) => void): UntypedServiceImplementation {
  // A failed sync fails every call waiting on it: one line, then at most one every 10 s.
  const unconfirmed = throttledStrays<{ method: string; error: UnconfirmedFlushError }>(({ method, error }, heldBack) =>
    log(`hook-runner: error: ${method}: ${error.message}${heldBackNote(heldBack)}`),
  );
  const unavailable = throttledStrays<{ method: string; error: SandboxUnavailableError }>(({ method, error }, heldBack) =>
    log(`hook-runner: error: ${method}: the sandbox is unavailable: ${error.message}${heldBackNote(heldBack)}`),
  );
  // The token was checked before the message was read (refuseWithoutToken).
  const unary = <M extends HookRunnerMethodName>(method: M): UnaryHandler<M> => (call, callback) => {
    const handle = handlers[method] as (request: HookRunnerMethods[M]['request'], state: CallState) => Promise<HookRunnerMethods[M]['reply']>;
    const passed = deadlinePassed(call.getDeadline());
    handle(call.request, { gaveUp: () => call.cancelled || passed() }).then(
      (reply) => callback(null, reply),
      (error: unknown) => {
        // A failed commit is logged once by the commit-failure guard (command.ts), not per call.
        if (error instanceof UnconfirmedFlushError) unconfirmed({ method, error });
        // A known state of this machine, said as a sentence (the start-up warning said it first).
        else if (error instanceof SandboxUnavailableError) unavailable({ method, error });
        else if (!(error instanceof RunnerError) && !isLedgerCommitFailure(error)) log(`hook-runner: ${method} failed unexpectedly: ${describe(error)}`);
        callback(toServerError(error));
      },
    );
  };
  return {
    Compile: unary('Compile'),
    Invoke: unary('Invoke'),
    PutSecret: unary('PutSecret'),
    ListSecretKeys: unary('ListSecretKeys'),
    DeleteSecret: unary('DeleteSecret'),
    Health: unary('Health'),
    ForgetOrg: unary('ForgetOrg'),
  };
}

/**
 * Refuses a call without the runner token once its metadata is in, before its message is read: a
 * Compile may carry 12 MiB, and a caller without the token could otherwise make the runner buffer
 * and decode that much per call (unary handlers see a call only with its whole message).
 */
function refuseWithoutToken(authorized: (metadata: Metadata) => boolean): ServerInterceptor {
  return (_method, next) => {
    const call: ServerInterceptingCall = new ServerInterceptingCall(next, {
      start: (startNext) =>
        startNext({
          onReceiveMetadata: (metadata, metadataNext) => {
            if (authorized(metadata)) metadataNext(metadata);
            else {
              const refused = toServerError(unauthenticated());
              call.sendStatus({ code: refused.code ?? status.UNAUTHENTICATED, details: refused.details ?? '', metadata: refused.metadata ?? null });
            }
          },
        }),
    });
    return call;
  };
}

function bind(server: Server, address: ListenAddress, tls: HookRunnerServerOptions['tls']): Promise<number> {
  const credentials = tls === undefined ? ServerCredentials.createInsecure() : ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }], false);
  return new Promise((resolvePort, reject) => {
    server.bindAsync(formatAddress(address), credentials, (error, port) => {
      if (error === null) resolvePort(port);
      // One line for the operator (a port in use, a unix socket path not writable), not grpc-js's stack.
      else reject(new RunnerConfigError(`could not listen on ${formatAddress(address)}: ${/\[(.+)\]\s*$/.exec(error.message)?.[1] ?? error.message}`));
    });
  });
}

/** The disk floor's lines (crossed down, crossed up, a failed read) as the runner's log lines. */
function floorLog(log: (line: string) => void): FloorLog {
  const line = (message: string, fields: Record<string, unknown>): void => log(`hook-runner: ${message} ${JSON.stringify(fields)}`);
  return { info: line, warn: line, error: line };
}

/** Opens the runner's state under `<dataDir>/hook-runner` and resolves once the server is bound. */
export async function createHookRunnerServer(options: HookRunnerServerOptions): Promise<HookRunnerServer> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const sandboxProblemOf = options.sandboxProblem ?? sandboxProblem;
  const now = options.now ?? Date.now;
  const token = parseRunnerToken(options.token, 'the runner token');
  const listen = parseListenAddress(options.listen);
  // Takes the store's lock before anything is written: a second runner on this store (a standalone
  // one beside sluice dev's child, or a child started while the one before it still drains) is refused.
  const store = openRunnerStore(options.dataDir, (cause) => {
    log(`hook-runner: error: the store's disk failed to sync a commit (${cause}): no write is answered as stored from now on`);
    options.onStoreFailed?.(cause);
  });
  let disk: DiskFloor | undefined;
  let modules: ModuleRegistry | undefined;
  let server: Server | undefined;
  const monotonic = options.monotonic ?? (() => performance.now());
  const pruning = new RecordPruning(options.pruneRecords ?? pruneRunnerRecords, (error) => log(`hook-runner: error: pruning old invocation records failed: ${describe(error)}`), monotonic);
  try {
    // Before this release's first write (the key rotation below); after its upgrades.
    const heldData = stampIn(store.dataFormat) > 1 || [store.modules, store.secrets, store.fences].some((table) => [...table.getKeys({ limit: 1 })].length > 0);
    await upgradeRunnerStore(store, now());
    const replaced = await stampRunnerStoreFormat(store);
    // Said once, as it happens (a store without a stamp is new, or from before the stamp: only that one held anything).
    if (replaced !== undefined && heldData) log(`hook-runner: store upgraded from format ${replaced} to ${RUNNER_STORE_FORMAT}; do not run an earlier release's runner on it (to go back, restore a copy taken before this start)`);
    const previousKeys = options.previousMasterKeys ?? [];
    const givenKey = typeof options.masterKey === 'string' ? parseMasterKey(options.masterKey, 'the master key') : options.masterKey;
    if (givenKey !== undefined && previousKeys.length === 0) refuseKeyTheFileContradicts(givenKey, runnerStoreDir(options.dataDir), (first, second) => whichOpens(store, first, second));
    const masterKey = givenKey ?? loadMasterKey(undefined, runnerStoreDir(options.dataDir), {
      sealedSecrets: () => store.secrets.getKeysCount(),
      previousGiven: previousKeys.length > 0,
      opensUnderPrevious: () => anyOpensUnder(store, previousKeys),
    });
    const { unreadable } = await rotateMasterKey(store, masterKey, previousKeys, log);
    if (givenKey !== undefined && previousKeys.length > 0 && unreadable === 0) retireRotatedKeyFile(runnerStoreDir(options.dataDir), previousKeys, log);
    // Armed after its first reading, before any call can come: start-up's writes (the key rotation
    // above) went ahead, as the runtime's do.
    disk = new DiskFloor(options.minFreeDiskMib ?? DEFAULT_MIN_FREE_DISK_MIB, options.freeDiskSpace ?? statfsProbe(runnerStoreDir(options.dataDir)), floorLog(log));
    disk.start();
    await disk.probeNow();
    disk.arm();
    const forgotten = new ForgottenOrgs(store, { dropCompiled: (digest) => modules?.dropCompiled(digest) });
    const isForgotten = (orgId: string): boolean => forgotten.has(orgId);
    modules = new ModuleRegistry(store, { compile: options.compile, forgotten: isForgotten });
    const handlers = createHookRunnerHandlers({
      modules,
      vault: new SecretVault(store, masterKey, isForgotten),
      // Dated by a clock a set back does not take back: a call made while the wall clock was behind
      // was otherwise pruned as that much older once it was put right, and its retry ran again.
      ledger: new InvocationLedger(store, wallFlooredByElapsed(now, monotonic), isForgotten),
      forgotten,
      limiter: createTenantTurns(options.sandboxSlots ?? sandboxSlotsFor(parseThreadPoolSize(undefined))),
      version: options.version ?? readPackageVersion(),
      sandboxReady: () => sandboxProblemOf() === undefined,
      startedAtMs: now(),
      now,
      assertWritable: () => {
        const refusal = disk?.refusal();
        if (refusal !== undefined) throw new DiskFullError(`The hook-runner's disk is nearly full: ${refusal.message}`);
      },
      diskLow: () => disk?.refusal() !== undefined,
      pruneFailing: () => pruning.failing,
    });
    server = new Server({
      'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
      'grpc.max_send_message_length': MAX_SEND_BYTES,
      interceptors: [refuseWithoutToken(createTokenCheck(token))],
    });
    server.addService(loadHookRunnerService(), createImplementation(handlers, log));
    await reclaimStaleSocket(listen);
    const port = await bind(server, listen, options.tls);
    // Said once at start: otherwise only the first upload or step, or Health, would show it.
    const problem = sandboxProblemOf();
    if (problem !== undefined) log(`hook-runner: warning: custom actions cannot compile or run here: ${problem}`);
    return serving({ store, disk, server, modules, listen, port, now, pruning });
  } catch (error) {
    // Whatever start-up had opened is closed again, the store's lock last, so a supervisor's next
    // start finds the store free instead of a lock to judge stale.
    server?.forceShutdown();
    modules?.close();
    disk?.close();
    await store.close();
    throw error;
  }
}

interface Started {
  readonly store: RunnerStore;
  readonly disk: DiskFloor;
  readonly server: Server;
  readonly modules: ModuleRegistry;
  readonly listen: ListenAddress;
  readonly port: number;
  readonly now: () => number;
  readonly pruning: RecordPruning;
}

/** The bound server's life: record pruning in the background, and a shutdown that drains and unlocks. */
function serving({ store, disk, server, modules, listen, port, now, pruning }: Started): HookRunnerServer {
  // Removals write pages too: none below the floor (the floor's own line says so).
  pruning.start(store, now, () => disk.refusal() === undefined);

  let closing: Promise<void> | undefined;
  const shutdown = async (): Promise<void> => {
    const pruned = pruning.stop();
    disk.close();
    await new Promise<void>((done) => {
      const force = setTimeout(() => server.forceShutdown(), SHUTDOWN_GRACE_MS);
      server.tryShutdown(() => {
        clearTimeout(force);
        done();
      });
    });
    modules.close();
    // A shutdown stops pruning after its pass in progress and waits for it before closing the store.
    await pruned;
    await store.close();
    if (listen.kind === 'unix') await unlink(listen.path).catch(() => undefined);
  };
  return {
    address: formatAddress(listen, port),
    close: () => (closing ??= shutdown()),
  };
}
