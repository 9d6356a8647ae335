// The CLI's parseArgs: an option given twice is refused in parseArgs' manner (the CLI says it in
// one line, exit 2); list options and booleans may repeat; what follows `--` is no option.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCommandArgs } from '../runtime/cli-parse-args.ts';

const options = { port: { type: 'string' }, tag: { type: 'string', multiple: true }, again: { type: 'boolean' } } as const;
const parse = (...args: string[]) => parseCommandArgs({ args, options, strict: true, allowPositionals: true });

test('a value option given twice is refused, in either spelling; list options, booleans and words after -- are not', () => {
  for (const args of [['--port', '1', '--port', '2'], ['--port=1', '--port', '2']]) {
    assert.throws(() => parse(...args), (error: unknown) => (error as { code?: string }).code === 'ERR_PARSE_ARGS_REPEATED_OPTION' && /Option '--port' is given more than once; give it once\./.test((error as Error).message), args.join(' '));
  }
  assert.deepEqual(parse('--tag', 'a', '--tag', 'b').values.tag, ['a', 'b']);
  assert.equal(parse('--again', '--again').values.again, true);
  assert.deepEqual(parse('--port', '1', '--', '--port', '2').positionals, ['--port', '2']);
});
