// Whether a live socket's reader has stopped reading: a socket that never reads keeps what was
// queued for it (a replay fills it to REPLAY_HIGH_WATER) below the slow-consumer cut for ever, and
// one key's 20,000 such sockets held gigabytes. Checked at each heartbeat: a socket with at least
// STALLED_BYTES queued that has not drained any of it since the last beat counts a stalled beat;
// STALLED_BEATS of them in a row and it is closed as a slow consumer. A reader that takes anything
// (a `drain`) or has little queued starts over.

/** Queued bytes below this are not worth a close: what an idle socket's heartbeats add. */
export const STALLED_BYTES = 16 * 1024;
/** Heartbeats in a row with no drain (at 5 s each: 30 s) before the socket is closed. */
export const STALLED_BEATS = 6;

export class StalledReader {
  #beats = 0;
  #drained = false;

  /** The socket wrote some of its queue out (uWS `drain`). */
  drained(): void {
    this.#drained = true;
  }

  /** One heartbeat with `buffered` bytes queued: true when the reader has stalled for STALLED_BEATS. */
  beat(buffered: number): boolean {
    this.#beats = buffered >= STALLED_BYTES && !this.#drained ? this.#beats + 1 : 0;
    this.#drained = false;
    return this.#beats >= STALLED_BEATS;
  }
}
