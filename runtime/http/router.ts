// Matches a method and a decoded path against the registered routes.
// Distinguishes "no such path" (404) from "path exists, wrong method" (405) for clear errors.

import { InputError, SluiceError } from '../errors.ts';
import type { Route } from './types.ts';

/**
 * Longest path parameter, in UTF-8 bytes. The longest name a path part stands for is a projection
 * entity_id (200 characters, counted as code points, so at most 800 bytes: 600 refused rows of 151
 * emoji that the list showed). Parameters end up in ledger keys, capped at 1978
 * bytes (lmdb-js throws on such a range bound, the memory twin on any use: a 500), so a longer one
 * can name nothing: 404 here, before any handler builds a key from it. Handlers narrow each
 * parameter further (ids, charsets).
 */
export const MAX_PATH_PARAM_BYTES = 800;

export interface RouteMatch {
  readonly route: Route;
  readonly params: Record<string, string>;
}

interface CompiledRoute {
  readonly route: Route;
  readonly segments: readonly string[];
}

export class Router {
  readonly #routes: CompiledRoute[] = [];

  add(...routes: Route[]): void {
    for (const route of routes) this.#routes.push({ route, segments: splitPath(route.pattern) });
  }

  /** Splits and percent-decodes a raw URL path; malformed escapes are a 400. */
  static decodePath(rawPath: string): string[] {
    return splitPath(rawPath).map(Router.decodeSegment);
  }

  /** Percent-decodes one raw path segment (a WebSocket route's parameter, as uWS hands it over undecoded); a malformed escape is a 400. */
  static decodeSegment(segment: string): string {
    try {
      return decodeURIComponent(segment);
    } catch {
      throw new InputError(400, 'malformed_path', 'The request path contains an invalid percent-encoding.');
    }
  }

  /** Returns the matching route, or throws 404/405 as a SluiceError (a 405 names the methods the path takes). */
  match(method: string, segments: readonly string[]): RouteMatch {
    const allowed = new Set<string>();
    for (const compiled of this.#routes) {
      const params = matchSegments(compiled.segments, segments);
      if (params === undefined) continue;
      if (compiled.route.method === method) return { route: compiled.route, params: assertParamSizes(params) };
      allowed.add(compiled.route.method);
    }
    if (allowed.size > 0) throw new MethodNotAllowedError(method, allowed);
    throw new SluiceError(404, 'route_not_found', 'No endpoint matches this path.');
  }
}

/** 405, with the methods the path takes (RFC 9110: the answer's `Allow` header lists them). */
export class MethodNotAllowedError extends SluiceError {
  readonly allow: string;
  constructor(method: string, allowed: ReadonlySet<string>) {
    // HEAD is answered wherever GET is.
    const methods = [...allowed, ...(allowed.has('GET') ? ['HEAD'] : [])].sort();
    super(405, 'method_not_allowed', `${method} is not allowed on this path; it takes ${methods.join(', ')}.`);
    this.allow = methods.join(', ');
  }
}

/** Whether a path parameter is short enough to name a record (past the cap a REST route answers 404; a store key could not hold it). */
export function namesSomething(parameter: string): boolean {
  return Buffer.byteLength(parameter, 'utf8') <= MAX_PATH_PARAM_BYTES;
}

function assertParamSizes(params: Record<string, string>): Record<string, string> {
  for (const [name, value] of Object.entries(params)) {
    if (!namesSomething(value)) {
      throw new SluiceError(404, 'not_found', `Path parameter ${name} is ${Buffer.byteLength(value, 'utf8')} bytes; the limit is ${MAX_PATH_PARAM_BYTES}, so it names nothing.`, { field: name });
    }
  }
  return params;
}

function splitPath(path: string): string[] {
  return path.split('/').filter((segment) => segment !== '');
}

function matchSegments(pattern: readonly string[], actual: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== actual.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i] as string;
    const value = actual[i] as string;
    if (expected.startsWith(':')) params[expected.slice(1)] = value;
    else if (expected !== value) return undefined;
  }
  return params;
}
