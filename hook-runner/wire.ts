// The hook-runner's wire contract as TypeScript: loads proto/hook_runner.proto once and types each
// method's messages. The one module both processes import (runtime client, runner server): no I/O beyond the proto.
import { fileURLToPath } from 'node:url';
import { loadSync, type MethodDefinition, type Options } from '@grpc/proto-loader';

/** Decoding rules shared by client and server: snake_case fields, uint64 as decimal strings. */
const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

export const SERVICE_NAME = 'sluice.hookrunner.v1.HookRunner';

/** The runner prints this plus its bound address on stdout once it serves (the supervisor reads it). */
export const LISTENING_PREFIX = 'hook-runner listening on ';

/** Trailing-metadata key that carries the snake_case Sluice error code of a failed call. */
export const SLUICE_CODE_METADATA_KEY = 'sluice-code';

/**
 * Every trap kind the sandbox reports (sandbox.ts re-exports this list: the runtime never imports the
 * addon wrapper), and `secret_in_output`, the runner's own (output-secrets.ts).
 */
export const TRAP_KINDS = [
  'out_of_fuel',
  'stack_overflow',
  'memory_out_of_bounds',
  'unreachable',
  'integer_divide_by_zero',
  'integer_overflow',
  'indirect_call',
  'abi_error',
  'secret_in_output',
  'other',
] as const;
export type WireTrapKind = (typeof TRAP_KINDS)[number];

export const isWireTrapKind = (value: string): value is WireTrapKind =>
  (TRAP_KINDS as readonly string[]).includes(value);

/** What one invocation produced, as both processes see it (the runner stores it, the client returns it). */
export type InvokeOutcome =
  | { readonly kind: 'output'; readonly outputJson: string }
  | { readonly kind: 'rejected'; readonly reason: string }
  | { readonly kind: 'trap'; readonly trap: WireTrapKind; readonly message: string };

/** uint64 fields: accepted on encode as number or decimal string, always decoded as a decimal string. */
type Uint64 = string;
type Uint64Input = string | number;

export interface CompileRequestWire { wasm: Uint8Array; org_id: string; restore: boolean }
export interface CompileReplyWire { digest: string }

export interface InvokeRequestWire {
  org_id: string;
  action_id: string;
  digest: string;
  permissions: string[];
  payload_json: string;
  idempotency_key: string;
  fence: Uint64Input;
  simulate: boolean;
  required_secret_keys: string[];
}
export interface RejectionWire { reason: string }
export interface TrapWire { kind: string; message: string }
/** Exactly one of output_json / rejected / trap is set; `outcome` names it on decode. */
export interface InvokeReplyWire {
  output_json?: string;
  rejected?: RejectionWire | null;
  trap?: TrapWire | null;
  outcome?: 'output_json' | 'rejected' | 'trap';
  fuel_used: Uint64Input;
  replayed: boolean;
}
export interface InvokeReplyDecoded extends InvokeReplyWire { fuel_used: Uint64 }

export interface PutSecretRequestWire { org_id: string; action_id: string; key: string; value: string }
export type PutSecretReplyWire = Record<string, never>;
export interface ListSecretKeysRequestWire { org_id: string; action_id: string }
export interface ListSecretKeysReplyWire { keys: string[] }
export interface DeleteSecretRequestWire { org_id: string; action_id: string; key: string }
export interface DeleteSecretReplyWire { deleted: boolean }
export interface ForgetOrgRequestWire { org_id: string }
export interface ForgetOrgReplyWire { records_removed: Uint64Input }
export type HealthRequestWire = Record<string, never>;
export interface HealthReplyWire { ok: boolean; version: string; uptime_ms: Uint64Input; disk_low: boolean; prune_failing: boolean }

/** Request and reply types of every RPC, keyed by the method name in the proto. */
export interface HookRunnerMethods {
  Compile: { request: CompileRequestWire; reply: CompileReplyWire };
  Invoke: { request: InvokeRequestWire; reply: InvokeReplyWire };
  PutSecret: { request: PutSecretRequestWire; reply: PutSecretReplyWire };
  ListSecretKeys: { request: ListSecretKeysRequestWire; reply: ListSecretKeysReplyWire };
  DeleteSecret: { request: DeleteSecretRequestWire; reply: DeleteSecretReplyWire };
  Health: { request: HealthRequestWire; reply: HealthReplyWire };
  ForgetOrg: { request: ForgetOrgRequestWire; reply: ForgetOrgReplyWire };
}
export type HookRunnerMethodName = keyof HookRunnerMethods;

export type HookRunnerServiceDefinition = {
  readonly [M in HookRunnerMethodName]: MethodDefinition<HookRunnerMethods[M]['request'], HookRunnerMethods[M]['reply']>;
};

const METHOD_NAMES: readonly HookRunnerMethodName[] = ['Compile', 'Invoke', 'PutSecret', 'ListSecretKeys', 'DeleteSecret', 'Health', 'ForgetOrg'];

let cached: HookRunnerServiceDefinition | undefined;

/** The service definition, loaded from the .proto on first use (never at import time). */
export function loadHookRunnerService(): HookRunnerServiceDefinition {
  if (cached !== undefined) return cached;
  const protoPath = fileURLToPath(new URL('../proto/hook_runner.proto', import.meta.url));
  const service = loadSync(protoPath, LOADER_OPTIONS)[SERVICE_NAME];
  if (service === undefined || !('Invoke' in service)) throw new Error(`${SERVICE_NAME} is missing from ${protoPath}`);
  for (const name of METHOD_NAMES) {
    if (!(name in service)) throw new Error(`${SERVICE_NAME}.${name} is missing from ${protoPath}`);
  }
  // proto-loader is untyped by design; the checks above plus HookRunnerMethods are the typed boundary.
  cached = service as unknown as HookRunnerServiceDefinition;
  return cached;
}
