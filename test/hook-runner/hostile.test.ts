// Hostile guests through the runner: endless loops end at the fuel limit, recursion at the stack
// limit, traps are reported by kind, imports are refused at Compile; 100 concurrent invocations
// (a third hostile) all complete correctly, and the runner keeps serving.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InvokeResult } from '../../runtime/hook-runner/client.ts';
import type { WireTrapKind } from '../../hook-runner/wire.ts';
import { MAX_TRAP_MESSAGE_CHARS } from '../../hook-runner/invocation-outcome.ts';
import { invocation, parseOutput, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat, constantWat, ECHO_WAT, HOSTILE_WAT, REJECT_WAT, type HostileName } from '../helpers/hook-runner-wat.ts';

const FUEL_LIMIT = 50_000_000;

let runner: RunnerFixture;
const digests = new Map<string, string>();
const digest = (name: string): string => digests.get(name) ?? assert.fail(`no module ${name}`);

before(async () => {
  runner = await startRunner();
  const sources: Record<string, string> = {
    echo: ECHO_WAT,
    reject: REJECT_WAT,
    notJson: constantWat('not json {'),
    // Past 20 characters V8 quotes only a window of the text, in other words.
    longNotJson: constantWat('sk_live_51HxSECRETabcdef0123456789 was the token'),
    longNotJsonInside: constantWat('{"user":"bob","password":hunter2-s3cr3t-value}'),
    ...Object.fromEntries(Object.entries(HOSTILE_WAT).filter(([name]) => name !== 'wasiImport')),
  };
  for (const [name, text] of Object.entries(sources)) digests.set(name, await runner.client.compile(await assembleWat(name, text)));
});
after(() => runner.close());

const expectTrap = (result: InvokeResult, trap: WireTrapKind): void => {
  assert.equal(result.outcome.kind, 'trap', `expected ${trap}, got ${JSON.stringify(result.outcome)}`);
  if (result.outcome.kind === 'trap') assert.equal(result.outcome.trap, trap, result.outcome.message);
};

const EXPECTED: Record<Exclude<HostileName, 'wasiImport'>, WireTrapKind> = {
  loop: 'out_of_fuel',
  recursion: 'stack_overflow',
  unreachable: 'unreachable',
  outOfBounds: 'memory_out_of_bounds',
  divideByZero: 'integer_divide_by_zero',
};

async function assertStillServing(): Promise<void> {
  assert.equal((await runner.client.health()).ok, true);
  const result = await runner.client.invoke(invocation(digest('echo'), { payloadJson: '{"alive":true}' }));
  assert.equal(result.outcome.kind, 'output');
  if (result.outcome.kind === 'output') assert.deepEqual(parseOutput(result.outcome.outputJson)['payload'], { alive: true });
}

describe('hostile guests', () => {
  it('stops an endless loop at exactly the fuel limit', async () => {
    const result = await runner.client.invoke(invocation(digest('loop')));
    expectTrap(result, 'out_of_fuel');
    assert.equal(result.fuelUsed, FUEL_LIMIT);
  });

  it('keeps a trap message that names long functions within 2048 characters, and keeps serving', async () => {
    // The longest name an upload may give (a longer one is refused: long-names.test.ts).
    const name = 'A'.repeat(1024);
    const text = `(module (memory (export "memory") 1)
      (func $${name} (param i32) (result i32) (call $${name} (local.get 0)))
      (func (export "execute") (param i32 i32) (result i32) (call $${name} (i32.const 0))))`;
    const longNamed = await runner.client.compile(await assembleWat('long-name', text, { names: true }));
    const result = await runner.client.invoke(invocation(longNamed));
    expectTrap(result, 'stack_overflow');
    if (result.outcome.kind === 'trap') {
      assert.ok(result.outcome.message.length <= MAX_TRAP_MESSAGE_CHARS, `${result.outcome.message.length} characters`);
      assert.ok(result.outcome.message.includes('AAAA'), 'the frame names are what made it long');
    }
    await assertStillServing();
  });

  for (const [name, trap] of Object.entries(EXPECTED)) {
    it(`reports ${name} as a ${trap} trap`, async () => {
      expectTrap(await runner.client.invoke(invocation(digest(name))), trap);
    });
  }

  it('reports output that is not JSON as an abi_error naming what is wrong with it, never quoting it', async () => {
    const result = await runner.client.invoke(invocation(digest('notJson')));
    expectTrap(result, 'abi_error');
    const message = result.outcome.kind === 'trap' ? result.outcome.message : '';
    assert.equal(message, 'The module output (10 characters) is not a JSON document: Unexpected token (not shown: the output is never quoted).');
    assert.ok(!message.includes('not json') && !message.includes("'o'"), 'the output itself is not shown, nor its first character: it is not masked');
    for (const [name, secret] of [['longNotJson', 'sk_live'], ['longNotJsonInside', 'hunter2']] as const) {
      const long = await runner.client.invoke(invocation(digest(name)));
      const text = long.outcome.kind === 'trap' ? long.outcome.message : '';
      assert.match(text, /^The module output \(\d+ characters\) is not a JSON document: Unexpected token \(not shown: the output is never quoted\)\.$/, name);
      assert.ok(!text.includes(secret) && !text.includes('"'), `${name}: no window of the output is quoted`);
    }
  });

  it('keeps serving after every hostile guest', assertStillServing);
});

describe('100 concurrent invocations', () => {
  it('all complete with the right outcome', async () => {
    const plan = Array.from({ length: 100 }, (_, index) => {
      const hostile = ['loop', 'recursion', 'unreachable', 'outOfBounds'] as const;
      if (index % 3 === 1) return { index, module: hostile[index % hostile.length] ?? 'loop' };
      return { index, module: index % 9 === 0 ? 'reject' : 'echo' };
    });
    const results = await Promise.all(plan.map(({ index, module }) => runner.client.invoke(invocation(digest(module), {
      idempotencyKey: `run_c${index}:step_1`,
      payloadJson: JSON.stringify({ index }),
    }))));
    plan.forEach(({ index, module }, position) => {
      const result = results[position];
      assert.ok(result !== undefined);
      assert.equal(result.replayed, false);
      if (module === 'echo') {
        assert.equal(result.outcome.kind, 'output', `#${index}`);
        if (result.outcome.kind === 'output') assert.deepEqual(parseOutput(result.outcome.outputJson)['payload'], { index });
      } else if (module === 'reject') {
        assert.equal(result.outcome.kind, 'rejected', `#${index}`);
      } else {
        expectTrap(result, EXPECTED[module as keyof typeof EXPECTED]);
        if (module === 'loop') assert.equal(result.fuelUsed, FUEL_LIMIT);
      }
    });
    await assertStillServing();
  });
});
