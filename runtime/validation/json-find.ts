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

/** A value still to visit, and how it was reached: its path is spelled out only for a find. */
interface Pending {
  readonly value: unknown;
  readonly parent: Pending | undefined;
  /** The member name or array index under `parent`. */
  readonly step: string | number | undefined;
}

function pathOf(node: Pending | undefined): string {
  const steps: Array<string | number> = [];
  for (let at = node; at?.step !== undefined; at = at.parent) steps.push(at.step);
  let path = '';
  for (let i = steps.length - 1; i >= 0; i--) {
    const step = steps[i]!;
    path = typeof step === 'number' ? `${path}[${step}]` : memberPath(path, step);
  }
  return path;
}

/** The first member name `badKey` holds for, or string `badText` holds for, depth first; or undefined. */
export function findInJson(root: unknown, checks: { readonly badKey?: (key: string) => boolean; readonly badText?: (text: string) => boolean }): JsonFind | undefined {
  const pending: Pending[] = [{ value: root, parent: undefined, step: undefined }];
  while (pending.length > 0) {
    const node = pending.pop()!;
    const { value } = node;
    if (typeof value === 'string') {
      if (checks.badText?.(value) === true) return { path: pathOf(node) };
    } else if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) {
        const item: unknown = value[index];
        // Only strings and containers can hold a find: numbers, booleans and null are not visited.
        if (item !== null && (typeof item === 'string' || typeof item === 'object')) pending.push({ value: item, parent: node, step: index });
      }
    } else if (value !== null && typeof value === 'object') {
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        if (checks.badKey?.(key) === true) return { path: pathOf(node), key };
        const item: unknown = (value as Record<string, unknown>)[key];
        if (item !== null && (typeof item === 'string' || typeof item === 'object')) pending.push({ value: item, parent: node, step: key });
      }
    }
  }
  return undefined;
}
