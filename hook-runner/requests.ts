// Parsers from decoded gRPC requests to typed commands: every size has a cap and every malformed
// field becomes an InvalidRequestError naming it. Nothing half-checked reaches the vault, ledger or sandbox.
import { InvalidRequestError } from './runner-error.ts';
import type {
  CompileRequestWire, DeleteSecretRequestWire, ForgetOrgRequestWire, InvokeRequestWire, ListSecretKeysRequestWire, PutSecretRequestWire,
} from './wire.ts';

export const REQUEST_LIMITS = {
  maxModuleBytes: 8 * 1024 * 1024,
  maxPayloadBytes: 1024 * 1024,
  maxPermissions: 25,
  /** Each must be named by a `read_secret` permission, so a call needs no more than it has permissions. */
  maxRequiredSecretKeys: 25,
  maxPermissionLength: 128,
  maxIdLength: 128,
  maxIdempotencyKeyLength: 256,
  maxSecretValueBytes: 64 * 1024,
} as const;

export type OrgId = string & { readonly __brand: 'OrgId' };
export type ActionId = string & { readonly __brand: 'ActionId' };
export type ModuleDigest = string & { readonly __brand: 'ModuleDigest' };
export type SecretKey = string & { readonly __brand: 'SecretKey' };

/** The vault partition of one custom action of one tenant. */
export interface SecretScope { readonly orgId: OrgId; readonly actionId: ActionId }

/** A recorded invocation is fenced and remembered; a simulated one leaves no trace. */
export type InvocationMode =
  | { readonly kind: 'simulate' }
  | { readonly kind: 'recorded'; readonly idempotencyKey: string; readonly runId: string; readonly fence: bigint };

export interface InvokeCommand {
  readonly scope: SecretScope;
  readonly digest: ModuleDigest;
  readonly permissions: readonly string[];
  /** Secret keys named by `read_secret:<KEY>` permissions, deduplicated, in permission order. */
  readonly secretKeys: readonly SecretKey[];
  /** Of those, the keys the caller set and expects the vault to hold (empty when simulating). */
  readonly requiredSecretKeys: readonly SecretKey[];
  /** Validated JSON text, passed to the guest byte for byte. */
  readonly payloadJson: string;
  readonly mode: InvocationMode;
}

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]*$/;
const DIGEST_PATTERN = /^[0-9a-f]{64}$/;
const SECRET_KEY_PATTERN = /^[A-Z0-9_]{1,64}$/;
const PRINTABLE_PATTERN = /^[\x21-\x7e]+$/;
const UINT64_MAX = 2n ** 64n - 1n;
const READ_SECRET_PREFIX = 'read_secret:';

const invalid = (field: string, message: string, code = 'invalid_request'): InvalidRequestError =>
  new InvalidRequestError(code, message, field);

export function parseId<T extends OrgId | ActionId>(value: string, field: string): T {
  if (value.length === 0) throw invalid(field, `${field} is required.`);
  if (value.length > REQUEST_LIMITS.maxIdLength || !ID_PATTERN.test(value)) {
    throw invalid(field, `${field} must be 1-${REQUEST_LIMITS.maxIdLength} characters of [A-Za-z0-9._:@-], starting with a letter or digit.`);
  }
  return value as T;
}

export function parseDigest(value: string, field = 'digest'): ModuleDigest {
  if (!DIGEST_PATTERN.test(value)) throw invalid(field, `${field} must be 64 lower-case hex characters (sha256).`);
  return value as ModuleDigest;
}

export function parseSecretKey(value: string, field = 'key'): SecretKey {
  if (!SECRET_KEY_PATTERN.test(value)) throw invalid(field, `${field} must match [A-Z0-9_]{1,64}.`);
  return value as SecretKey;
}

export const parseForgetOrgRequest = (request: ForgetOrgRequestWire): OrgId => parseId<OrgId>(request.org_id, 'org_id');

export function parseSecretScope(request: ListSecretKeysRequestWire): SecretScope {
  return { orgId: parseId<OrgId>(request.org_id, 'org_id'), actionId: parseId<ActionId>(request.action_id, 'action_id') };
}

/** A Compile: the module's bytes, and the org whose turn it waits in (none: a turn of its own). */
export interface CompileCommand {
  readonly bytes: Uint8Array;
  readonly tenant: OrgId | '';
  readonly restore: boolean;
}

export function parseCompileRequest(request: CompileRequestWire): CompileCommand {
  const bytes = parseModuleBytes(request.wasm);
  // An id like Invoke's when given: it keys the org's place in the compile queue (tenant-queue.ts).
  const tenant = request.org_id === '' ? '' : parseId<OrgId>(request.org_id, 'org_id');
  return { bytes, tenant, restore: request.restore };
}

export function parseModuleBytes(wasm: Uint8Array): Uint8Array {
  if (wasm.byteLength === 0) throw invalid('wasm', 'wasm must not be empty.');
  if (wasm.byteLength > REQUEST_LIMITS.maxModuleBytes) {
    throw invalid('wasm', `wasm is ${wasm.byteLength} bytes; the limit is ${REQUEST_LIMITS.maxModuleBytes}.`, 'module_too_large');
  }
  return wasm;
}

export function parsePutSecretRequest(request: PutSecretRequestWire): { scope: SecretScope; key: SecretKey; value: string } {
  const scope = parseSecretScope(request);
  const key = parseSecretKey(request.key);
  // The message deliberately reports sizes only: the value is a secret.
  const bytes = Buffer.byteLength(request.value, 'utf8');
  if (bytes > REQUEST_LIMITS.maxSecretValueBytes) {
    throw invalid('value', `value is ${bytes} bytes; the limit is ${REQUEST_LIMITS.maxSecretValueBytes}.`, 'secret_too_large');
  }
  return { scope, key, value: request.value };
}

export function parseDeleteSecretRequest(request: DeleteSecretRequestWire): { scope: SecretScope; key: SecretKey } {
  return { scope: parseSecretScope(request), key: parseSecretKey(request.key) };
}

function parsePermissions(permissions: readonly string[]): { permissions: string[]; secretKeys: SecretKey[] } {
  if (permissions.length > REQUEST_LIMITS.maxPermissions) {
    throw invalid('permissions', `At most ${REQUEST_LIMITS.maxPermissions} permissions are allowed; got ${permissions.length}.`, 'too_many_permissions');
  }
  const secretKeys = new Set<SecretKey>();
  permissions.forEach((permission, index) => {
    const field = `permissions[${index}]`;
    if (permission.length > REQUEST_LIMITS.maxPermissionLength || !PRINTABLE_PATTERN.test(permission)) {
      throw invalid(field, `${field} must be 1-${REQUEST_LIMITS.maxPermissionLength} printable ASCII characters without spaces.`);
    }
    if (permission.startsWith(READ_SECRET_PREFIX)) {
      secretKeys.add(parseSecretKey(permission.slice(READ_SECRET_PREFIX.length), field));
    }
  });
  return { permissions: [...permissions], secretKeys: [...secretKeys] };
}

function parsePayloadJson(text: string): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > REQUEST_LIMITS.maxPayloadBytes) {
    throw invalid('payload_json', `payload_json is ${bytes} bytes; the limit is ${REQUEST_LIMITS.maxPayloadBytes}.`, 'payload_too_large');
  }
  try {
    JSON.parse(text);
  } catch {
    throw invalid('payload_json', 'payload_json is not valid JSON.', 'invalid_payload_json');
  }
  return text;
}

/** `<runId>:<stepId>`: the run id is everything before the last ':' and may itself contain ':'. */
export function parseIdempotencyKey(value: string): { idempotencyKey: string; runId: string } {
  const separator = value.lastIndexOf(':');
  if (value.length > REQUEST_LIMITS.maxIdempotencyKeyLength || !PRINTABLE_PATTERN.test(value) || separator <= 0 || separator === value.length - 1) {
    throw invalid('idempotency_key', `idempotency_key must be <runId>:<stepId>, printable ASCII, at most ${REQUEST_LIMITS.maxIdempotencyKeyLength} characters.`);
  }
  return { idempotencyKey: value, runId: value.slice(0, separator) };
}

function parseFence(value: string | number): bigint {
  const text = String(value);
  if (!/^[0-9]{1,20}$/.test(text) || BigInt(text) > UINT64_MAX) throw invalid('fence', 'fence must be an unsigned 64-bit integer.');
  const fence = BigInt(text);
  if (fence === 0n) throw invalid('fence', 'fence must be at least 1 for a recorded invocation.');
  return fence;
}

export function parseInvokeRequest(request: InvokeRequestWire): InvokeCommand {
  const scope = { orgId: parseId<OrgId>(request.org_id, 'org_id'), actionId: parseId<ActionId>(request.action_id, 'action_id') };
  const digest = parseDigest(request.digest);
  const { permissions, secretKeys } = parsePermissions(request.permissions);
  const payloadJson = parsePayloadJson(request.payload_json);
  const mode: InvocationMode = request.simulate
    ? { kind: 'simulate' }
    : { kind: 'recorded', ...parseIdempotencyKey(request.idempotency_key), fence: parseFence(request.fence) };
  const requiredSecretKeys = request.simulate ? [] : parseRequiredSecretKeys(request.required_secret_keys ?? [], secretKeys);
  return { scope, digest, permissions, secretKeys, requiredSecretKeys, payloadJson, mode };
}

/**
 * Each required key must also be read by a permission: the call may not demand a secret it cannot
 * read. Counted before any is read (a list of millions held the runner for seconds); a key named
 * twice is kept once, in first-named order.
 */
function parseRequiredSecretKeys(keys: readonly string[], readable: readonly SecretKey[]): SecretKey[] {
  const { maxRequiredSecretKeys } = REQUEST_LIMITS;
  if (keys.length > maxRequiredSecretKeys) {
    throw invalid('required_secret_keys', `At most ${maxRequiredSecretKeys} required_secret_keys are allowed (each named by a read_secret permission); got ${keys.length}.`);
  }
  const permitted = new Set<string>(readable);
  const required = new Set<SecretKey>();
  keys.forEach((key, index) => {
    const field = `required_secret_keys[${index}]`;
    const parsed = parseSecretKey(key, field);
    if (!permitted.has(parsed)) throw invalid(field, `${field} (${key}) is not named by a read_secret permission of the call.`);
    required.add(parsed);
  });
  return [...required];
}
