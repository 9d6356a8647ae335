// Customer event schemas compile in an ajv instance that is replaced once it has compiled its
// budget, and the validators it made are dropped with it: one instance kept every schema it ever
// compiled, so refused writes and cache misses grew the heap for ever.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { SchemaCompiler } from '../../runtime/sources/schema-compiler.ts';
import { ROOT } from '../helpers/runtime.ts';

const schemaFor = (n: number) => ({ type: 'object', properties: { n: { type: 'integer', maximum: n } }, required: ['n'] });

test('the instance is replaced when its compile or byte budget is spent, and the owner is told to drop its validators', () => {
  let dropped = 0;
  const compiler = new SchemaCompiler({ compiles: 3, bytes: 10_000 }, () => (dropped += 1));
  const first = compiler.compile(schemaFor(1), 100);
  for (let n = 2; n <= 7; n += 1) compiler.compile(schemaFor(n), 100);
  assert.equal(compiler.generation, 3, '7 compiles at 3 per instance');
  assert.equal(dropped, 2);
  assert.equal(first({ n: 1 }), true, 'a validator outlives its instance for whoever still holds it');
  assert.equal(first({ n: 2 }), false);
  compiler.compile(schemaFor(8), 9_950);
  assert.equal(compiler.generation, 4, 'the byte budget counts too');
  assert.throws(() => compiler.compile({ type: 'no-such-type' }, 10), /schema is invalid/);
  assert.ok(compiler.formats.includes('email'));
});

test('compiling many schemas keeps the heap flat (it grew by about 4 KB a compile, without bound)', () => {
  // Each payload is checked against a schema of a new source version: a cache miss, compiled by the
  // ingest path's long-lived compiler.
  const script = `
    import { compiledValidator, validateWith } from './runtime/sources/event-schemas.ts';
    const heap = () => { globalThis.gc(); return process.memoryUsage().heapUsed; };
    const compileMany = (from) => {
      for (let i = from; i < from + 2000; i++) {
        const source = { org_id: 'acct-heap', name: 'payments', updated_at: String(i), event_types: { t: { type: 'object', properties: { a: { type: 'string', maxLength: i + 1 } } } } };
        validateWith(compiledValidator(source, 't'), { a: 'x' });
      }
    };
    compileMany(0);
    const before = heap();
    compileMany(2000); compileMany(4000); compileMany(6000);
    process.stdout.write(String(heap() - before));
  `;
  const run = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  assert.equal(run.status, 0, run.stderr);
  const grown = Number(run.stdout);
  // One instance's worth (2,000 compiles) at most; the leak added some 24 MiB over these 6,000 (measured).
  assert.ok(grown < 10 * 1024 * 1024, `the heap grew by ${(grown / 1048576).toFixed(1)} MiB over 6,000 compiles`);
});
