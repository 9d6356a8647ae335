// The shape of a webhook source (as the API and ingest see it, and as the ledger stores it) and the
// checks on its signing secrets, per scheme. Secrets live only in the ledger record; the API view
// (describeSource) never includes them.

import { randomBytes } from 'node:crypto';
import { InputError } from '../errors.ts';
import { withSchemasParsed, withSchemaText, withoutSchemas, type WithStoredSchemas } from './stored-schemas.ts';

export type Scheme = 'standard-webhooks' | 'stripe' | 'github';
export const SCHEMES: readonly Scheme[] = ['standard-webhooks', 'stripe', 'github'];
export type Environment = 'production' | 'sandbox';
export const ENVIRONMENTS: readonly Environment[] = ['production', 'sandbox'];

export const SOURCE_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,63}$';
/** 1-128 letters, digits, `_.:-`, not starting with `.:-`; never `__proto__` (validation/proto-key.ts says why). */
export const EVENT_TYPE_PATTERN = '^(?!__proto__$)[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$';
/** EVENT_TYPE_PATTERN compiled, the one copy every check of an event type uses (no `g` flag: `test` keeps no state). */
export const EVENT_TYPE_REGEX = new RegExp(EVENT_TYPE_PATTERN);
/** EVENT_TYPE_PATTERN in words, for error messages. */
export const EVENT_TYPE_RULE = 'The event type must be 1-128 letters, digits, "_", ".", ":" or "-", starting with a letter, digit or "_" (and not "__proto__").';
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;
export const MAX_BODY_LIMIT_BYTES = 8 * 1024 * 1024;
export const MAX_ACTIVE_SECRETS = 5;
/** Standard Webhooks keys must decode to at least this many bytes. */
export const MIN_STANDARD_KEY_BYTES = 24;

export interface SourceRecord {
  /**
   * Made at creation (`src_` + 24 hex), never shown: it tells a source from one deleted and made
   * again under its name in the same millisecond. Sources made before it have none.
   */
  readonly id?: string;
  readonly org_id: string;
  readonly name: string;
  readonly scheme: Scheme;
  /** Every active signing secret; a request verifies if any one of them matches (rotation). */
  readonly secrets: readonly string[];
  readonly environment: Environment;
  /** Declared event types and their JSON Schemas; a type not declared here is accepted unvalidated. */
  readonly event_types: Readonly<Record<string, object>>;
  readonly body_limit_bytes: number;
  readonly created_at: string;
  readonly updated_at: string;
}

/**
 * A source without its schemas: what a delivery needs before its signature is checked (the body
 * cap, the scheme and secrets, the environment). Cached apart from whole records (source-store.ts),
 * so an unsigned request never decodes the up to ~1 MiB of schemas a source may declare.
 */
export type SourceHead = Omit<SourceRecord, 'event_types'>;

/** A source as the ledger holds it: its schemas as JSON text (stored-schemas.ts; data format 8). */
export type StoredSource = WithStoredSchemas<SourceHead>;

/** The record to store for `source`. */
export const storedSource = (source: SourceRecord): StoredSource => withSchemaText<SourceHead>(source);

/** The source a stored record holds, its schemas parsed. */
export const sourceFromStored = (stored: StoredSource): SourceRecord => withSchemasParsed(stored);

/** The source a stored record holds, without its schemas. */
export const headOfStoredSource = (stored: StoredSource): SourceHead => withoutSchemas(stored);

/**
 * Whether two reads of a name are the same source: one deleted and made again under its name while
 * a request waited is another (its own scheme, secrets and delivery ids), never to be mixed up.
 */
export const isSameSource = (a: SourceHead, b: SourceHead): boolean => a.id === b.id && a.created_at === b.created_at && a.scheme === b.scheme && a.environment === b.environment;

/** The id of a new source. */
export const newSourceId = (): string => `src_${randomBytes(12).toString('hex')}`;

export interface SourceView {
  readonly name: string;
  readonly scheme: Scheme;
  readonly environment: Environment;
  readonly event_types: Readonly<Record<string, object>>;
  readonly body_limit_bytes: number;
  readonly active_secrets: number;
  readonly ingest_path: string;
  readonly created_at: string;
  readonly updated_at: string;
}

export function describeSource(source: SourceRecord): SourceView {
  return {
    name: source.name,
    scheme: source.scheme,
    environment: source.environment,
    event_types: source.event_types,
    body_limit_bytes: source.body_limit_bytes,
    active_secrets: source.secrets.length,
    ingest_path: `/hooks/${source.org_id}/${source.name}`,
    created_at: source.created_at,
    updated_at: source.updated_at,
  };
}

/** Decodes a Standard Webhooks secret (`whsec_` prefix optional) to its key bytes, or undefined if not base64. */
export function decodeStandardSecret(secret: string): Buffer | undefined {
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 === 1) return undefined;
  return Buffer.from(encoded, 'base64');
}

/** Throws a 400 naming `secrets[i]` when a secret cannot serve its scheme. */
export function assertSecretsFit(scheme: Scheme, secrets: readonly string[]): void {
  secrets.forEach((secret, index) => {
    const field = `secrets[${index}]`;
    if (scheme !== 'standard-webhooks') return;
    const key = decodeStandardSecret(secret);
    if (key === undefined) {
      throw new InputError(400, 'invalid_secret', 'A standard-webhooks secret must be base64, optionally prefixed with "whsec_".', { field });
    }
    if (key.length < MIN_STANDARD_KEY_BYTES) {
      throw new InputError(
        400,
        'secret_too_short',
        `A standard-webhooks secret is read as base64 (after an optional "whsec_") and must decode to at least ${MIN_STANDARD_KEY_BYTES} bytes; this one decodes to ${key.length}. Make one with: echo whsec_$(head -c 32 /dev/urandom | base64)`,
        { field },
      );
    }
  });
}
