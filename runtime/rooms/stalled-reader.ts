// Whether a live socket's reader has stopped reading, or reads too little to ever catch up: a socket
// that never reads keeps what was queued for it (a replay fills it to REPLAY_HIGH_WATER) below the
// slow-consumer cut for ever, and one key's 20,000 such sockets held gigabytes; one that reads a
// few bytes now and then held as much. Checked at each heartbeat: a socket with at least
// STALLED_BYTES queued counts a stalled beat when it has drained nothing since the last beat, or,
// while it replays (every byte sent to it is then counted here: no room's topic writes to it), less
// than MIN_REPLAY_READ_BYTES; STALLED_BEATS of them in a row and it is closed as a slow consumer.
// Anything else starts the count over. (A live socket's topic frames are not counted, so a fast
// reader of a busy room, whose queue never empties, is not taken for a slow one.)

/** Queued bytes below this are not worth a close: what an idle socket's heartbeats add. */
export const STALLED_BYTES = 16 * 1024;
/** Heartbeats in a row with no drain (at 5 s each: 30 s) before the socket is closed. */
export const STALLED_BEATS = 6;
/** What a replaying reader must take per heartbeat (5 s: ~6.5 KB/s) to count as reading. */
export const MIN_REPLAY_READ_BYTES = 32 * 1024;

export class StalledReader {
  #beats = 0;
  #drained = false;
  /** Bytes sent to the socket since the last beat (replay pages and heartbeats). */
  #sent = 0;
  /** Bytes queued at the last beat. */
  #queued = 0;

  /** The socket wrote some of its queue out (uWS `drain`). */
  drained(): void {
    this.#drained = true;
  }

  /** A frame of `bytes` was sent to the socket by the rooms themselves (not through a topic). */
  sent(bytes: number): void {
    this.#sent += bytes;
  }

  /**
   * One heartbeat with `buffered` bytes queued (`replaying`: the socket is on no topic, so every
   * byte sent to it went through `sent`): true when the reader has stalled for STALLED_BEATS.
   */
  beat(buffered: number, replaying = false): boolean {
    const read = this.#sent + this.#queued - buffered;
    const tooLittle = !this.#drained || (replaying && read < MIN_REPLAY_READ_BYTES);
    this.#beats = buffered >= STALLED_BYTES && tooLittle ? this.#beats + 1 : 0;
    this.#drained = false;
    this.#sent = 0;
    this.#queued = buffered;
    return this.#beats >= STALLED_BEATS;
  }
}
