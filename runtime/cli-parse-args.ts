// Node's parseArgs as every command calls it, with one rule more: an option given twice is refused
// (`--port 1 --port 2`), where parseArgs keeps the last one without a word. Options that take a
// list (`multiple`) may repeat, and so may a boolean (`--again --again` says one thing).

import { parseArgs, type ParseArgsConfig } from 'node:util';

/** parseArgs(`config`); a repeated option is refused with a parseArgs-style error (cli-usage-error.ts says it). */
export function parseCommandArgs<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  const parsed = parseArgs({ ...config, tokens: true });
  const seen = new Set<string>();
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== 'option') continue;
    const option = config.options?.[token.name];
    if (option?.multiple === true || option?.type === 'boolean') continue;
    if (seen.has(token.name)) throw repeatedOption(token.rawName);
    seen.add(token.name);
  }
  // The same values and positionals; `tokens` rides along unread.
  return parsed as ReturnType<typeof parseArgs<T>>;
}

function repeatedOption(rawName: string): Error {
  const error = new Error(`Option '${rawName}' is given more than once; give it once.`);
  return Object.assign(error, { code: 'ERR_PARSE_ARGS_REPEATED_OPTION' });
}
