// A parsed JSON body as small as its top level: an object's members that are objects or arrays
// become null, scalars stay. A body checked and parsed in a thread crosses back as this (cheap to
// copy), enough for a body schema to judge every member but the nested ones, which the caller
// reads again as text when it needs them (a large API event's payload, stored as its text).

/** `value` with nested containers left out: an object keeps its keys, an array becomes []. */
export function topLevelShape(value: unknown): unknown {
  if (Array.isArray(value)) return [];
  if (value === null || typeof value !== 'object') return value;
  // No prototype: a member named `__proto__` stays a member (on `{}` its assignment set the prototype,
  // and a body schema never saw it), as JSON.parse keeps it.
  const shape = Object.create(null) as Record<string, unknown>;
  for (const [key, member] of Object.entries(value)) shape[key] = member !== null && typeof member === 'object' ? null : member;
  return shape;
}
