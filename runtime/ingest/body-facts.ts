// What webhook ingest needs of a body once it is known to be JSON (checked and parsed, on the event
// loop or in a thread): whether it is an object, and its top-level `id` and `type` when they are
// strings. Small enough to cross between threads; the parsed body itself never needs to.

export interface BodyFacts {
  readonly object: boolean;
  readonly id: string | undefined;
  readonly type: string | undefined;
}

/** The facts of a parsed body. */
export function bodyFactsOf(value: unknown): BodyFacts {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { object: false, id: undefined, type: undefined };
  const { id, type } = value as Record<string, unknown>;
  return { object: true, id: typeof id === 'string' ? id : undefined, type: typeof type === 'string' ? type : undefined };
}
