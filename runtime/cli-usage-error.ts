// Node's parseArgs refusals in the CLI's own words, one line each: an unknown option is told the
// command's options and the likeliest one meant (Node's advice, to put it after `--`, led only to
// another refusal), and an option followed by a word starting with '-' how to give that as its value.

/**
 * The options a command's help names (`--name`), in the order first named: those that open a line
 * when it lists them so (dev and serve: a line may name another process's options), else all.
 */
export function optionsNamedIn(help: string): string[] {
  const listed = [...help.matchAll(/^\s+(--[a-z][a-z-]*[a-z])/gm)].map((match) => match[1]!);
  return [...new Set(listed.length > 0 ? listed : (help.match(/--[a-z][a-z-]*[a-z]/g) ?? []))].filter((option) => option !== '--help');
}

/** Edits (insert, delete, replace, or swap two neighbours: `prot` for `port`) from `a` to `b`. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** Whether the letters of `short` appear in `long` in order, the first one first (`tz` in `timezone`). */
const abbreviates = (short: string, long: string): boolean => {
  if (short[0] !== long[0]) return false;
  let at = 0;
  for (const letter of short) {
    at = long.indexOf(letter, at) + 1;
    if (at === 0) return false;
  }
  return true;
};

/** The option most likely meant by `typed`, if one is close: a typo, a prefix, or an abbreviation. */
export function likeliestOption(typed: string, options: readonly string[]): string | undefined {
  const name = typed.replace(/^-+/, '');
  const scored = options
    .map((option) => {
      const candidate = option.slice(2);
      const distance = editDistance(name, candidate);
      const close = distance <= Math.max(1, Math.floor(candidate.length / 4)) || candidate.startsWith(name) || name.startsWith(candidate) || abbreviates(name, candidate);
      return { option, distance, close };
    })
    .filter(({ close }) => close)
    .sort((a, b) => a.distance - b.distance);
  return scored[0]?.option;
}

/** Options named in an unknown option's message; a command with more has them listed by --help alone. */
const LISTED_OPTIONS = 8;

/** `error`'s message as the CLI says it (`help`: the command's help text), or undefined when it is no parseArgs refusal. */
export function usageErrorText(error: unknown, command: string | undefined, help: string): string | undefined {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_') || typeof message !== 'string') return undefined;
  const who = command === undefined ? 'sluice' : `sluice ${command}`;
  const unknown = /^Unknown option '([^']*)'/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown !== undefined) {
    const options = optionsNamedIn(help);
    const meant = likeliestOption(unknown, options);
    if (meant !== undefined) return `Unknown option '${unknown}' for ${who}: did you mean ${meant}? (${who} --help lists its options)`;
    // A long list is left to the help, which says what each does.
    const listed = options.length > 0 && options.length <= LISTED_OPTIONS ? `; its options: ${options.join(', ')}` : '';
    return `Unknown option '${unknown}' for ${who}${listed} (${who} --help ${listed === '' ? 'lists its options' : 'says more'})`;
  }
  const ambiguous = /^Option '([^']*)' argument is ambiguous/.exec(message)?.[1];
  if (ambiguous !== undefined) return `Option '${ambiguous}' is followed by a word starting with '-': to give that as its value, join them with '=' (${ambiguous}=-5, say)`;
  return message.split('\n').join(' ');
}
