// The ajv instance that compiles customer event schemas, replaced by a fresh one once it has
// compiled its budget. ajv keeps every schema and validator it ever compiled referenced from the
// instance (its code-generation scope), and `removeSchema` does not release them: one long-lived
// instance grew by 30–60 KB per compile, for ever (refused source writes and cache misses alike).
// A replaced instance is freed as soon as nothing holds its validators, so the owner drops every
// validator it cached from it (`onReplaced`); the budget matches the validator cache's bounds, so
// the heap holds at most about what that cache allows.

import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { RE2JS } from 're2js';

/**
 * `pattern` and `patternProperties` compiled by RE2 instead of V8's backtracking engine: a schema
 * with `^(a+)+$` would otherwise let one payload freeze the event loop for every tenant. RE2 has
 * no lookaround or backreferences; a schema that uses them is refused when it is written.
 */
const re2Engine = Object.assign((pattern: string) => RE2JS.compile(pattern), { code: 're2js' });

/**
 * The most instructions a `pattern` may compile to. RE2's time is linear in the text, times the
 * states it tracks: `[a-z]{1000}` four times (4,003 instructions) took 4 s on a 40,000-character
 * string. Checks run off the event loop with a deadline (schema-checks.ts), so this only keeps
 * absurd patterns out; length bounds such as `^.{1,500}$` (1,003) are everyday schema fare.
 */
export const MAX_PATTERN_PROGRAM_SIZE = 10_000;
/** The most RE2 instructions all the patterns of one schema may compile to. Both caps are checked before ajv compiles (event-schemas.ts patternProgram). */
export const MAX_SCHEMA_PATTERN_PROGRAM = 100_000;

/** The RE2 program size of `pattern`; 0 for one RE2 cannot read (ajv refuses it when compiling). */
export function patternProgramSize(pattern: string): number {
  try {
    return RE2JS.compile(pattern).programSize();
  } catch {
    return 0;
  }
}

// A separate instance: customer schemas never share compiled state with the API's own schemas.
// Not strict: real-world schemas carry harmless extras (`required` without `properties`, vendor
// keywords); meta-schema validation still refuses anything that is not a JSON Schema.
// `addUsedSchema: false` keeps a schema's `$id` out of the instance's registry. `ownProperties`: a
// payload's inherited members (`constructor`, `toString`) are not its fields.
function freshAjv(): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true, addUsedSchema: false, ownProperties: true, code: { regExp: re2Engine } });
  (addFormats as unknown as (instance: Ajv) => void)(ajv);
  return ajv;
}

export interface CompileBudget {
  /** Compiles per instance. */
  readonly compiles: number;
  /** Bytes of schema text compiled per instance. */
  readonly bytes: number;
}

export class SchemaCompiler {
  readonly #budget: CompileBudget;
  readonly #onReplaced: () => void;
  #ajv = freshAjv();
  #compiles = 0;
  #bytes = 0;
  #generation = 1;

  /** `onReplaced` must drop every validator compiled so far: they hold the old instance. */
  constructor(budget: CompileBudget, onReplaced: () => void) {
    this.#budget = budget;
    this.#onReplaced = onReplaced;
  }

  /** The formats `format` may name (ajv-formats'). */
  get formats(): readonly string[] {
    return Object.keys(this.#ajv.formats);
  }

  /** Whether ajv applies `keyword` when it checks a payload (annotations such as "title" it does not). */
  appliesKeyword(keyword: string): boolean {
    return this.#ajv.getKeyword(keyword) !== false;
  }

  /** Which instance compiles now (1, 2, …): it changes when the budget of the last is spent. */
  get generation(): number {
    return this.#generation;
  }

  /**
   * Compiles a self-contained schema (`bytes`: its JSON text's length) and drops the instance's
   * cache entry for it; throws what ajv throws for a schema that is not valid.
   */
  compile(schema: object, bytes: number): ValidateFunction {
    if (this.#compiles >= this.#budget.compiles || this.#bytes + bytes > this.#budget.bytes) this.#replace();
    this.#compiles += 1;
    this.#bytes += bytes;
    try {
      return this.#ajv.compile(schema);
    } finally {
      this.#ajv.removeSchema(schema);
    }
  }

  #replace(): void {
    this.#ajv = freshAjv();
    this.#compiles = 0;
    this.#bytes = 0;
    this.#generation += 1;
    this.#onReplaced();
  }
}
