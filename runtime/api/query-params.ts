// Shared query-string parsers of the list endpoints: environment scope, page size and cursor.
// Each returns a typed value or throws a 400 naming the parameter.

import { createHash } from 'node:crypto';
import { InputError, notFound } from '../errors.ts';
import { EVENT_ID_PATTERN } from '../events/event-record.ts';
import type { HttpRequest } from '../http/types.ts';
import { ENVIRONMENTS, type Environment } from '../sources/source-record.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';

/** What a write to a record named by its path takes: `?environment=`, the record's environment. */
export const ENVIRONMENT_QUERY = ['environment'] as const;

/**
 * The environment a request is scoped to: `?environment=`, default production; anything else is a
 * 400, and sandbox on a plan without one is a 402, except for a DELETE: sandbox records kept from
 * a plan that had one still count against the org's caps (sources, schedules, devices, workflows),
 * and an org told "delete one first" must be able to.
 */
export function environmentOf(request: HttpRequest, org: Organization): Environment {
  const value = request.query.get('environment') ?? 'production';
  if (!(ENVIRONMENTS as readonly string[]).includes(value)) {
    throw new InputError(400, 'invalid_environment', 'environment must be "production" or "sandbox".', { field: 'environment' });
  }
  if (request.method !== 'DELETE') assertSandboxAllowed(org, value);
  return value as Environment;
}

/**
 * The record named by the path (`:name`) if it lives in the requested environment; one of the
 * other environment is a 404, as an unknown name is (`require` throws that one).
 */
export function namedInEnvironment<T extends { readonly environment: string }>(request: HttpRequest, org: Organization, what: string, require: (orgId: string, name: string) => T): T {
  const environment = environmentOf(request, org);
  const name = request.params.name ?? '';
  const record = require(org.id, name);
  if (record.environment !== environment) throw notFound(`${what} "${name}"`, 'name');
  return record;
}

export function parseLimit(request: HttpRequest): number {
  const raw = request.query.get('limit') ?? '50';
  if (!/^\d{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > 500) {
    throw new InputError(400, 'invalid_limit', 'limit must be an integer from 1 to 500.', { field: 'limit' });
  }
  return Number(raw);
}

/**
 * What a cursor belongs to: the list's path (its org and endpoint) and its filters, every query
 * parameter but `cursor` and `limit`, hashed. A cursor carries it, so one used on another list,
 * org or filter is a 400 instead of a silently wrong page (a projection cursor of one entity type
 * read under another answered no rows).
 */
function listScope(request: HttpRequest): string {
  // `environment=production` is the list without it: the default, the same rows.
  const sameList = ([name, value]: [string, string]): boolean => name !== 'cursor' && name !== 'limit' && !(name === 'environment' && value === 'production');
  const filters = [...request.query].filter(sameList).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256').update(JSON.stringify([request.path, filters])).digest('base64url').slice(0, 16);
}

/** Encodes a list position as the opaque `next_cursor` string of the list `request` asked for. */
export const encodeCursor = (request: HttpRequest, position: readonly unknown[]): string => Buffer.from(JSON.stringify([...position, listScope(request)])).toString('base64url');

/** Longer than any cursor this API hands out (two key parts of at most a few hundred bytes). */
const MAX_CURSOR_LENGTH = 2048;

/** One element check of a cursor's shape. */
export type PositionPart<T> = (value: unknown) => value is T;
type PositionOf<S extends readonly PositionPart<unknown>[]> = { -readonly [K in keyof S]: S[K] extends PositionPart<infer T> ? T : never };

/**
 * Decodes `?cursor=` back into a position of exactly the given shape (one check per element, no
 * extra elements), or throws a 400. The position becomes part of an LMDB range key, so anything
 * else (an object, a 3,000-character id) must stop here.
 */
export function parseCursorOf<const S extends readonly PositionPart<unknown>[]>(request: HttpRequest, shape: S): PositionOf<S> | undefined {
  return parseCursorWith(request, (position) => position.length === shape.length && shape.every((isPart, i) => isPart(position[i]))) as PositionOf<S> | undefined;
}

/**
 * Decodes `?cursor=` into a position `accept` takes (a list whose positions vary in shape checks
 * them itself), or throws a 400 as parseCursorOf does.
 */
export function parseCursorWith(request: HttpRequest, accept: (position: readonly unknown[]) => boolean): unknown[] | undefined {
  const raw = request.query.get('cursor');
  if (raw === null) return undefined;
  if (raw.length <= MAX_CURSOR_LENGTH) {
    try {
      const value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
      if (Array.isArray(value) && value.length >= 1 && value.at(-1) === listScope(request)) {
        const position = value.slice(0, -1);
        if (accept(position)) return position;
      }
    } catch {
      // fall through to the error below
    }
  }
  throw new InputError(400, 'invalid_cursor', 'cursor must be a value returned as next_cursor by this endpoint, for the same organization and filters (only limit may change).', { field: 'cursor' });
}

const isTime = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;
/** Event ids match EVENT_ID_PATTERN; run ids (`run_<hex>`) do too. */
const LISTED_ID = new RegExp(EVENT_ID_PATTERN);
export const isListedId = (value: unknown): value is string => typeof value === 'string' && LISTED_ID.test(value);

/** The (time, id) position of the time-ordered lists (events, runs). */
export const parseCursor = (request: HttpRequest): [number, string] | undefined => parseCursorOf(request, [isTime, isListedId]);
