// A helper's default command-line options under the caller's own: the CLI refuses an option given
// twice, so a default the caller also gives (`--port`, `--admin-token`, ...) is left out.

/** `defaults` (pairs of `--flag value`) without the flags `given` names, then `given`. */
export function withDefaults(defaults: readonly string[], given: readonly string[] = []): string[] {
  const named = new Set(given.filter((arg) => arg.startsWith('--')).map((arg) => arg.split('=')[0]!));
  const kept: string[] = [];
  for (let i = 0; i < defaults.length; i += 2) if (!named.has(defaults[i]!)) kept.push(defaults[i]!, defaults[i + 1]!);
  return [...kept, ...given];
}
