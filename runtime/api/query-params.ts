// Shared query-string parsers of the list endpoints: environment scope, page size and cursor.
// Each returns a typed value or throws a 400 naming the parameter.

import { InputError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';
import { ENVIRONMENTS, type Environment } from '../sources/source-record.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';

/**
 * The environment a read is scoped to: `?environment=`, default production; anything else is a 400,
 * and sandbox on a plan without one is a 402.
 */
export function environmentOf(request: HttpRequest, org: Organization): Environment {
  const value = request.query.get('environment') ?? 'production';
  if (!(ENVIRONMENTS as readonly string[]).includes(value)) {
    throw new InputError(400, 'invalid_environment', 'environment must be "production" or "sandbox".', { field: 'environment' });
  }
  assertSandboxAllowed(org, value);
  return value as Environment;
}

export function parseLimit(request: HttpRequest): number {
  const raw = request.query.get('limit') ?? '50';
  if (!/^\d{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > 500) {
    throw new InputError(400, 'invalid_limit', 'limit must be an integer from 1 to 500.', { field: 'limit' });
  }
  return Number(raw);
}

/** Encodes a list position as the opaque `next_cursor` string of a list answer. */
export const encodeCursor = (position: readonly unknown[]): string => Buffer.from(JSON.stringify(position)).toString('base64url');

/** Decodes `?cursor=` back into a position of the given shape, or throws a 400. */
export function parseCursorOf<T extends readonly unknown[]>(request: HttpRequest, isPosition: (value: unknown[]) => value is T[number][] & T): T | undefined {
  const raw = request.query.get('cursor');
  if (raw === null) return undefined;
  try {
    const value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && isPosition(value)) return value;
  } catch {
    // fall through to the error below
  }
  throw new InputError(400, 'invalid_cursor', 'cursor must be a value returned as next_cursor by this endpoint.', { field: 'cursor' });
}

/** The (time, id) position of the time-ordered lists (events, runs). */
export const parseCursor = (request: HttpRequest): [number, string] | undefined =>
  parseCursorOf<[number, string]>(request, (v): v is [number, string] => typeof v[0] === 'number' && typeof v[1] === 'string');
