// Counts the event loop's turns (one per check phase) while a test's work runs: how tests see that
// long work yields, and in which turn something happened.

export interface TurnCounter {
  /** Turns counted so far. */
  readonly count: () => number;
  /** Stops counting (the count stays as it is). */
  readonly stop: () => void;
}

/** Starts counting from the next turn. */
export function countTurns(): TurnCounter {
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    if (!counting) return;
    turns += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  return { count: () => turns, stop: () => void (counting = false) };
}
