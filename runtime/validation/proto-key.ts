// The one object key Sluice cannot keep: msgpackr, which encodes every stored record, reads a key
// "__proto__" back as "__proto_" (its guard against prototype pollution, on every map). Customer
// names and JSON that Sluice stores as values, not as their exact text (event types that key a
// schema map, webhook header names, a custom action's output), must not hold it: refused with a
// clear error instead of silently renamed or dropped.

export const PROTO_KEY = '__proto__';

/** The path (`a.b[2]`) of the first "__proto__" key in a parsed JSON value, or undefined. */
export function protoKeyPath(root: unknown): string | undefined {
  const pending: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }];
  while (pending.length > 0) {
    const { value, path } = pending.pop()!;
    if (Array.isArray(value)) value.forEach((item, index) => pending.push({ value: item, path: `${path}[${index}]` }));
    else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        const at = path === '' ? key : `${path}.${key}`;
        if (key === PROTO_KEY) return at;
        pending.push({ value: item, path: at });
      }
    }
  }
  return undefined;
}
