// Text that is not Unicode: a UTF-16 surrogate without its pair (`"\ud800"` is valid JSON). The
// storage codec (msgpackr) writes strings as UTF-8 and reads such a one back as U+FFFD characters,
// so a name or a schema holding it would change on its way to disk (a 200-character name reading
// back as 600, a schema `enum` refusing the very value it was written with): refused instead.

/** The path (`a.b[2]`, or `a.<key>` for a key) of the first string or key with a lone surrogate in a parsed JSON value, or undefined. */
export function loneSurrogatePath(root: unknown): string | undefined {
  const pending: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }];
  while (pending.length > 0) {
    const { value, path } = pending.pop()!;
    if (typeof value === 'string') {
      if (!isWellFormed(value)) return path === '' ? '(the value)' : path;
    } else if (Array.isArray(value)) value.forEach((item, index) => pending.push({ value: item, path: `${path}[${index}]` }));
    else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        const at = path === '' ? key : `${path}.${key}`;
        if (!isWellFormed(key)) return path === '' ? '(a member name)' : `${path} (a member name)`;
        pending.push({ value: item, path: at });
      }
    }
  }
  return undefined;
}

/** String.prototype.isWellFormed (Node 20; not yet in this project's ES2023 typings). */
const isWellFormed = (text: string): boolean => (text as unknown as { isWellFormed(): boolean }).isWellFormed();
