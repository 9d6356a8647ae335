// Checks event payloads against the schemas their source (or device) declares, and compiles the
// schemas a write declares, in worker threads (schema-check-worker.ts), each with a deadline. A
// check costs up to schema size x payload size: a hostile schema within every write-time cap (a
// 26 KB `anyOf` of 1,500 values against 20,000 array items) took 9 s, and compiling a 1 MiB write
// of schemas 6.5 s; on the event loop that was that long with no answer for any tenant. Past the
// deadline the thread is ended (a new one starts for the rest) and the payload or write refused.
//
// Compiling a schema and checking a payload with it have deadlines of their own: a large schema
// that compiles in seconds (it passed the write's compile) must not fail every payload's check.
// A deadline is only given up on after the event loop has taken the thread's answers in: a busy
// loop (another tenant's work) must not turn a check that finished in time into a refusal.
//
// Large webhook bodies are read (checked and parsed) in a thread of their own the same way: JSON.parse
// and the nesting and duplicate-member scans took ~30 ms of the event loop per MiB.
//
// One check runs at a time per thread; orgs take turns, and each org's checks run in the order they
// came, so a tenant's slow checks delay its own, not another's behind all of them. A check that
// asks for order (`ordered`, a device socket's messages) waits behind its org's earlier checks even
// when its own type declares no schema, so messages are still stored in the order they came.

import { Worker } from 'node:worker_threads';
import { InputError, RetryableError, SluiceError } from '../errors.ts';
import type { SchemaDeclarer } from './event-schemas.ts';
import type { BodyFacts } from '../ingest/body-facts.ts';
import type { CheckAnswer, CheckRequest } from './schema-check-worker.ts';

/** How long checking one payload may take, once its schema is compiled. */
export const SCHEMA_CHECK_DEADLINE_MS = 1000;
/** How long compiling may take: a write's schemas (a 1 MiB write of 200 took 6.5 s), or one schema before a check. */
export const SCHEMA_COMPILE_DEADLINE_MS = 20_000;

/** Memory a checking thread may use; past it the thread ends, as at the deadline. */
const WORKER_HEAP_MB = 512;

export interface SchemaCheckDeadlines {
  readonly checkMs: number;
  readonly compileMs: number;
}

/** The refusal of a body read (webhook or API) past its deadline. */
const bodyTooComplex = (_code: string, what: string): InputError => new InputError(422, 'body_too_complex', `Reading this JSON body ${what}; nothing was stored. Send a smaller body.`);

/** What a request resolves with: nothing (a check or compile passed), a webhook body's facts, or an API body's top level. */
type CheckResult = BodyFacts | { readonly shape: unknown } | undefined;

interface Check {
  readonly orgId: string;
  /** Undefined for a place in line only (an ordered check of a type without a schema). */
  readonly request: CheckRequest | undefined;
  /** The refusal when a deadline passes (`what`: "took longer than …", or why the thread ended). */
  readonly tooSlow: (code: string, what: string) => InputError;
  /** With a body read's facts; a check or compile resolves with none. */
  readonly resolve: (answer: CheckResult) => void;
  readonly reject: (error: Error) => void;
}

/** The text of a schema object, kept per object (sources and devices come from caches that reuse them). */
const schemaTexts = new WeakMap<object, string>();
const schemaTextOf = (schema: object): string => {
  let text = schemaTexts.get(schema);
  if (text === undefined) schemaTexts.set(schema, (text = JSON.stringify(schema)));
  return text;
};

export class SchemaChecks {
  readonly #deadlines: SchemaCheckDeadlines;
  #worker: Worker | undefined;
  #ready = false;
  #closed = false;
  /** Each org's checks not started yet, oldest first. */
  readonly #waiting = new Map<string, Check[]>();
  /** Orgs with checks waiting, in the order they take their turns. */
  readonly #turns: string[] = [];
  #running: Check | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Counts deadlines armed: a give-up queued for one that has since been armed again (or cleared) does nothing. */
  #armed = 0;
  #nextId = 1;

  constructor(deadlines: SchemaCheckDeadlines = { checkMs: SCHEMA_CHECK_DEADLINE_MS, compileMs: SCHEMA_COMPILE_DEADLINE_MS }) {
    this.#deadlines = deadlines;
  }

  /** Whether the thread is working on a check now (tests wait for one to be under way). */
  get running(): boolean {
    return this.#running !== undefined;
  }

  /**
   * Checks the payload (as JSON text) against the declarer's schema for `type`: resolves when it
   * passes, rejects with the 422 naming the field otherwise. Undefined (nothing to wait for) when
   * the type declares no schema and, for an `ordered` check, none of the org's checks is waiting.
   */
  check(declarer: SchemaDeclarer, type: string, payloadJson: string, ordered = false): Promise<void> | undefined {
    const orgId = declarer.org_id;
    // Own keys only: a type named like an Object.prototype member ("constructor") declares no schema.
    const schema = Object.hasOwn(declarer.event_types, type) ? declarer.event_types[type] : undefined;
    if (schema === undefined && !(ordered && (this.#waiting.has(orgId) || this.#running?.orgId === orgId))) return undefined;
    const request = schema === undefined ? undefined : { kind: 'payload' as const, id: this.#nextId++, orgId, name: declarer.name, type, schemaText: schemaTextOf(schema), payloadJson };
    const tooSlow = (code: string, what: string): InputError =>
      new InputError(422, code, `Checking this payload against the schema for "${type}" ${what}; nothing was stored. Send a smaller payload, or make the schema simpler.`, { field: 'payload' });
    return this.#enqueue(orgId, request, tooSlow).then(ignore);
  }

  /**
   * Reads a webhook body's text as ingest would on the event loop (readJsonText: 400 for malformed,
   * too deep or duplicate-member JSON) and resolves with its facts. Bounded by the compile deadline
   * (it is linear in the body's size: an 8 MiB body takes ~0.1 s).
   */
  async readBody(orgId: string, text: string): Promise<BodyFacts> {
    const request = { kind: 'body' as const, id: this.#nextId++, text };
    return (await this.#enqueue(orgId, request, bodyTooComplex)) as BodyFacts;
  }

  /**
   * Reads a large API body's text as parseJsonRequestText would its bytes (parseApiJsonText: 400
   * for malformed, too deep, duplicate-member JSON or a lone surrogate) and resolves with its top
   * level (topLevelShape), for its body schema to judge; bounded as readBody is.
   */
  async readApiBody(orgId: string, text: string): Promise<unknown> {
    const request = { kind: 'body' as const, id: this.#nextId++, text, apiBody: true };
    return ((await this.#enqueue(orgId, request, bodyTooComplex)) as { readonly shape: unknown }).shape;
  }

  /**
   * Compiles every schema a write of `orgId` declares (type -> schema; none: nothing to do):
   * resolves when all compile, rejects with the 400 naming the event type otherwise (assertSchemasCompile).
   */
  async compile(orgId: string, eventTypes: Readonly<Record<string, object>> | undefined): Promise<void> {
    if (eventTypes === undefined || Object.keys(eventTypes).length === 0) return;
    const request = { kind: 'compile' as const, id: this.#nextId++, eventTypesText: JSON.stringify(eventTypes) };
    const tooSlow = (code: string, what: string): InputError =>
      new InputError(400, code === 'schema_check_too_slow' ? 'schema_compile_too_slow' : code, `Compiling these event type schemas ${what}; nothing was saved. Declare fewer or smaller schemas in one write.`, { field: 'event_types' });
    await this.#enqueue(orgId, request, tooSlow);
  }

  /** Ends the thread; checks waiting or running, and any asked for later, are refused as retryable (the runtime is stopping). */
  async close(): Promise<void> {
    this.#closed = true;
    const stopping = stoppingError();
    this.#running?.reject(stopping);
    this.#running = undefined;
    for (const queue of this.#waiting.values()) for (const check of queue) check.reject(stopping);
    this.#waiting.clear();
    this.#turns.length = 0;
    clearTimeout(this.#timer);
    const worker = this.#worker;
    this.#worker = undefined;
    this.#ready = false;
    await worker?.terminate();
  }

  #enqueue(orgId: string, request: CheckRequest | undefined, tooSlow: Check['tooSlow']): Promise<CheckResult> {
    if (this.#closed) return Promise.reject(stoppingError());
    return new Promise<CheckResult>((resolve, reject) => {
      const check = { orgId, request, tooSlow, resolve, reject };
      const queue = this.#waiting.get(orgId);
      if (queue === undefined) {
        this.#waiting.set(orgId, [check]);
        this.#turns.push(orgId);
      } else queue.push(check);
      this.#pump();
    });
  }

  /** Moves the line on, then holds the program open only while there is checking to do. */
  #pump(): void {
    this.#drain();
    this.#holdOpenWhileBusy();
  }

  /** Starts the next check when none runs (the thread first, if it is not ready): orgs in turn, places in line settled on the way. */
  #drain(): void {
    while (!this.#closed && this.#running === undefined && this.#turns.length > 0) {
      const orgId = this.#turns[0]!;
      const queue = this.#waiting.get(orgId)!;
      const next = queue[0]!;
      if (next.request !== undefined && !this.#ready) {
        this.#start();
        return;
      }
      queue.shift();
      this.#turns.shift();
      if (queue.length > 0) this.#turns.push(orgId);
      else this.#waiting.delete(orgId);
      if (next.request === undefined) {
        next.resolve(undefined);
        continue;
      }
      this.#running = next;
      this.#worker!.postMessage(next.request);
      // A payload check compiles its schema first (compileMs); `compiled` starts its own deadline.
      // A body read has only the first.
      this.#arm(next, this.#deadlines.compileMs);
    }
  }

  /** The deadline of the running check, from now. */
  #arm(check: Check, ms: number): void {
    clearTimeout(this.#timer);
    // When it passes, the thread's answer may be waiting behind a busy event loop: take what has
    // come in first (setImmediate runs after the loop has read the thread's messages).
    const armed = ++this.#armed;
    this.#timer = setTimeout(() => setImmediate(() => {
      if (armed === this.#armed) this.#giveUp(check, 'schema_check_too_slow', `took longer than ${ms} ms`);
    }), ms);
    this.#timer.unref();
  }

  /** Starts the thread (once); it says `ready` when it can check. */
  #start(): void {
    if (this.#worker !== undefined) return;
    const worker = new Worker(new URL('./schema-check-thread.mjs', import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } });
    this.#worker = worker;
    worker.on('message', (answer: CheckAnswer) => this.#answer(worker, answer));
    // A thread that dies (out of memory) takes the running check with it, as at the deadline.
    worker.on('error', (error) => {
      if (this.#worker !== worker) return;
      const running = this.#running;
      if (running !== undefined) this.#giveUp(running, 'schema_check_failed', `failed (${error.message})`);
      else this.#replace();
    });
    this.#holdOpenWhileBusy();
  }

  /**
   * A thread with checks to do keeps the program alive until they are answered; an idle one does
   * not. Called after the listeners are added (adding a 'message' listener refs the thread again).
   */
  #holdOpenWhileBusy(): void {
    if (this.#running !== undefined || this.#turns.length > 0) this.#worker?.ref();
    else this.#worker?.unref();
  }

  #answer(worker: Worker, answer: CheckAnswer): void {
    if (this.#worker !== worker) return;
    if (answer.kind === 'ready') {
      this.#ready = true;
      this.#pump();
      return;
    }
    const running = this.#running;
    if (running?.request?.id !== answer.id) return;
    if (answer.kind === 'compiled') {
      this.#arm(running, this.#deadlines.checkMs);
      return;
    }
    clearTimeout(this.#timer);
    this.#running = undefined;
    if (answer.kind === 'passed') running.resolve(undefined);
    else if (answer.kind === 'read') running.resolve(answer.shape === undefined ? answer.facts : { shape: answer.shape });
    else {
      const options = answer.field === undefined ? {} : { field: answer.field };
      running.reject(answer.status < 500 ? new InputError(answer.status, answer.code, answer.message, options) : new SluiceError(answer.status, answer.code, answer.message, options));
    }
    this.#pump();
  }

  /** Refuses the running check (its payload and schema are what took too long), and starts a new thread for the rest. */
  #giveUp(check: Check, code: string, what: string): void {
    if (this.#running !== check) return;
    this.#running = undefined;
    check.reject(check.tooSlow(code, what));
    this.#replace();
  }

  #replace(): void {
    clearTimeout(this.#timer);
    const worker = this.#worker;
    this.#worker = undefined;
    this.#ready = false;
    void worker?.terminate();
    this.#pump();
  }
}

const ignore = (): void => undefined;

const stoppingError = (): RetryableError => new RetryableError('stopping', 'Sluice is stopping; send it again in a few seconds.', 2000);

/**
 * A runtime's three checking threads, each started when first needed: payloads, the schemas of
 * source and device writes (a slow write never holds up payload checks), and large webhook bodies.
 */
export interface SchemaThreads {
  readonly payloads: SchemaChecks;
  readonly writes: SchemaChecks;
  readonly bodies: SchemaChecks;
}

export const startSchemaThreads = (deadlines?: SchemaCheckDeadlines): SchemaThreads => ({ payloads: new SchemaChecks(deadlines), writes: new SchemaChecks(deadlines), bodies: new SchemaChecks(deadlines) });

/** Ends every thread of the runtime (SchemaChecks.close). */
export const closeSchemaThreads = async (threads: SchemaThreads): Promise<void> => {
  await Promise.all(Object.values(threads).map((checks: SchemaChecks) => checks.close()));
};
