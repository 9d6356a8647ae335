// Polls a condition of the bench's own state (what a receiver counted) until it holds, or fails
// after a bound, saying where things stood.

export async function until(condition: () => boolean, timeoutMs: number, describeState: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${describeState()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
