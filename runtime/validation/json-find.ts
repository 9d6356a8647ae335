// Finds the first member name or string of a parsed JSON value that fails a check, with where it
// is. The walk keeps its own stack, so a hostile document nested deep cannot overflow the call
// stack; proto-key.ts and lone-surrogate.ts each look for what the storage codec cannot keep.

/** Where a find is: the path of its object and the key, for a member name; the string's path, for a string. */
export interface JsonFind {
  readonly path: string;
  readonly key?: string;
}

/** Joins a path (`a.b[2]`) and a member name. */
export const memberPath = (path: string, key: string): string => (path === '' ? key : `${path}.${key}`);

/** The first member name `badKey` holds for, or string `badText` holds for, depth first; or undefined. */
export function findInJson(root: unknown, checks: { readonly badKey?: (key: string) => boolean; readonly badText?: (text: string) => boolean }): JsonFind | undefined {
  const pending: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }];
  while (pending.length > 0) {
    const { value, path } = pending.pop()!;
    if (typeof value === 'string') {
      if (checks.badText?.(value) === true) return { path };
    } else if (Array.isArray(value)) value.forEach((item, index) => pending.push({ value: item, path: `${path}[${index}]` }));
    else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        if (checks.badKey?.(key) === true) return { path, key };
        pending.push({ value: item, path: memberPath(path, key) });
      }
    }
  }
  return undefined;
}
