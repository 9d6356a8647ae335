// Holds one call of a method (of a prototype, or of one object) before it runs, until the test
// releases it: the window a slow fsync, a queue or a compile gives, made to happen every time.

export interface CallGate {
  /** Whether the held call has been made. */
  reached: () => boolean;
  /** Resolves once the held call has been made (it waits for `release` then). */
  whenReached: Promise<void>;
  release: () => void;
  /** Resolves once the held call has been made; rejects if `answer` settles first (the call never came). */
  reachedBefore: (answer: Promise<unknown>, what: string) => Promise<void>;
  /** For `finally`: lets a held call go, and puts the method back if the call never came. */
  done: () => void;
}

/**
 * Holds the next call of `method` on `target` until `release`; the method is itself again for later
 * calls. With `failure`, the held call then rejects with it instead of running (a write that fails).
 */
export function gateNextCall(target: object, method: string, failure?: Error): CallGate {
  const methods = target as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = methods[method]!;
  let reached = false;
  let arrive: () => void = () => undefined;
  const whenReached = new Promise<void>((resolve) => (arrive = resolve));
  let release: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (release = resolve));
  const gate = async function (this: unknown, ...args: unknown[]) {
    methods[method] = original;
    reached = true;
    arrive();
    await opened;
    if (failure !== undefined) throw failure;
    return original.apply(this, args);
  };
  methods[method] = gate;
  const reachedBefore = (answer: Promise<unknown>, what: string): Promise<void> =>
    Promise.race([whenReached, answer.then(() => Promise.reject(new Error(`${what} was answered before it reached ${method}`)))]);
  const done = (): void => {
    release();
    if (methods[method] === gate) methods[method] = original;
  };
  return { reached: () => reached, whenReached, release, reachedBefore, done };
}

/**
 * Waits until the request behind `answer` reaches the held call, runs `meanwhile`, then lets the call
 * go however `meanwhile` ends: a failed assertion fails the test instead of leaving the request held
 * (which hangs the file at its runtime's close). Fails at once when `answer` settles first.
 */
export async function whileCallHeld(gate: CallGate, answer: Promise<unknown>, what: string, meanwhile: () => Promise<unknown>): Promise<void> {
  try {
    await gate.reachedBefore(answer, what);
    await meanwhile();
  } finally {
    gate.done();
  }
}

/**
 * Counts the calls of `method` on `target` from now, letting each through at once: `made` resolves
 * once `times` have been made (inside the last of them, before it returns); `restore` puts the method back.
 */
export function watchCalls(target: object, method: string, times: number): { made: Promise<void>; count: () => number; restore: () => void } {
  const methods = target as Record<string, (...args: unknown[]) => unknown>;
  const hadOwn = Object.hasOwn(target, method);
  const original = methods[method]!;
  let calls = 0;
  let done: () => void = () => undefined;
  const made = new Promise<void>((resolve) => (done = resolve));
  methods[method] = function (this: unknown, ...args: unknown[]) {
    if (++calls === times) done();
    return original.apply(this, args);
  };
  return {
    made,
    count: () => calls,
    restore: () => {
      if (hadOwn) methods[method] = original;
      else delete methods[method];
    },
  };
}
