// A socket's catch-up from the retained update log, read a page at a time by seq range, and the
// record of what a socket has been sent of a room, so that a later Subscribe does not send it again.

import { encodeLiveMessage, type RunUpdate } from './live-codec.ts';
import { isInRoom, type Room } from './live-subscription.ts';
import type { UpdateLog } from './update-log.ts';

/** Log entries read per page: the most of the log a replay holds in memory at once. */
export const REPLAY_PAGE_SIZE = 256;

/**
 * The socket has been sent every update of `room` with after < seq <= upTo, except the seqs in
 * `missing` (skipped as gaps: they may still arrive, and were not sent), and the seqs in `late`
 * below the range (updates published late that its topic delivered after it joined).
 */
export interface SentRange {
  readonly room: Room;
  readonly after: number;
  readonly upTo: number;
  readonly missing: ReadonlySet<number>;
  readonly late?: ReadonlySet<number>;
}

/**
 * What a socket has been sent, as the ranges of its earlier subscriptions (a live stretch, a replay),
 * oldest first: one range per subscription, so switching rooms and back repeats nothing. At most
 * MAX_SENT_RANGES are kept; past that the oldest are forgotten (a later Subscribe may then repeat
 * what only they covered, never miss an update).
 */
export type Sent = readonly SentRange[];

const MAX_SENT_RANGES = 16;

/** `earlier` with one more range, keeping the newest MAX_SENT_RANGES. */
const withRange = (earlier: Sent, range: SentRange): Sent => [...earlier, range].slice(-MAX_SENT_RANGES);

/** A replay in progress: the socket is on no topic until it has caught up. */
export interface Replay {
  readonly room: Room;
  /** The after_seq asked for. */
  readonly after: number;
  /** `after` is a position, 0 included: a trimmed log refuses it (Subscription.strict). */
  readonly strict: boolean;
  /**
   * Where what the replay sends starts: `after`, except for a non-strict after_seq 0, which starts
   * below the oldest update retained when it first reads (startAtRetained). What the socket was sent
   * is recorded from here: recorded from 0, a later Subscribe from an older position found it
   * covered and got nothing of the trimmed stretch, where it is owed a 4410.
   */
  start: number;
  /** Every log entry with a seq up to this one has been sent or left out. Only `nextPage` moves it. */
  cursor: number;
  /** What the socket had been sent before this replay began; left out of it. */
  readonly earlier: Sent;
  /** Its next page is queued for its org's turn (replay-turns.ts). */
  scheduled: boolean;
  /**
   * Seqs the replay went past that were not in the log when read (a write not yet committed, or one
   * that failed): if such an update is fanned out later, the replay sends it then. Bounded.
   */
  readonly gaps: Set<number>;
  /**
   * Late updates at or below `start` sent to the socket during the replay (it never reads them: it
   * starts past them), remembered as a live socket's are (at most MAX_REMEMBERED_LATE).
   */
  readonly late: Set<number>;
}

/** Gap seqs a replay remembers at most; past them (a long stretch of failed writes) it cannot go on (Page.gapsFull). */
export const MAX_REMEMBERED_GAPS = 1024;

export interface Page {
  readonly frames: Uint8Array[];
  /** Every retained update up to the `upTo` given is in this page or was in an earlier one. */
  readonly caughtUp: boolean;
  /**
   * One more seq would have to be waited for than MAX_REMEMBERED_GAPS: the replay stops before it,
   * since sending it (it may never be durable) or passing over it (a Subscribe would count it as
   * sent) would mislead the client. The socket is told to reload (4410).
   */
  readonly gapsFull?: true;
}

export const wasSent = (sent: Sent, update: RunUpdate): boolean =>
  sent.some((range) => (range.late?.has(update.seq) === true || (update.seq > range.after && update.seq <= range.upTo && !range.missing.has(update.seq))) && isInRoom(update, range.room));

/** Late seqs a live socket remembers at most (beyond them a later Subscribe may repeat one, never miss one). */
export const MAX_REMEMBERED_LATE = 1024;

export function startReplay(room: Room, after: number, earlier: Sent, strict = false): Replay {
  return { room, after, strict, start: after, cursor: after, earlier, scheduled: false, gaps: new Set(), late: new Set() };
}

/**
 * A non-strict after_seq 0 asks for whatever is retained: before its first read, its start and
 * cursor move below the oldest retained update `oldest` (any other replay is left as it is).
 */
export function startAtRetained(replay: Replay, oldest: number): void {
  if (replay.after !== 0 || replay.strict || replay.cursor !== 0) return;
  replay.start = replay.cursor = Math.max(0, oldest - 1);
}

/** What a replay has sent of its room so far (for a Subscribe that interrupts it). */
export const sentSoFar = (replay: Replay): Sent =>
  withRange(replay.earlier, { room: replay.room, after: replay.start, upTo: replay.cursor, missing: new Set(replay.gaps), late: new Set(replay.late) });

/**
 * What a socket on the room's topic since `from` (the last seq fanned out when it joined) has been
 * sent once it leaves at `publishedSeq`: everything fanned out meanwhile, except the seqs skipped
 * as gaps and not published since (`skipped`), and the late updates at or below `from` the topic
 * delivered meanwhile (`late`).
 */
export const sentWhileLive = (earlier: Sent, room: Room, from: number, publishedSeq: number, skipped: ReadonlySet<number>, late: ReadonlySet<number>): Sent =>
  withRange(earlier, { room, after: from, upTo: publishedSeq, missing: skipped, late });

/** The seqs the seq order skipped as gaps and has not published since (seq-order.ts): their writes may still land. */
export interface SkippedSeqs {
  isSkipped(seq: number): boolean;
  /** Those after `after`, up to `upTo`. */
  between(after: number, upTo: number): ReadonlySet<number>;
}

/**
 * The next frames of the replay: retained updates of its room after the cursor up to `upTo`, at most
 * one page of the log and about `budget` bytes (always at least one frame when one is due). Leaves
 * out what `earlier` covers and advances the cursor past every entry it returned or left out. An
 * entry `skipped` says may still be lost is kept as a gap, sent when it is published late.
 */
export function nextPage(log: UpdateLog, orgId: string, replay: Replay, upTo: number, budget: number, skipped: SkippedSeqs): Page {
  // Seqs below the retained log were dropped, not delayed: none of them can still arrive, and an
  // entry left there (until UpdateLog.trim sweeps it) is not replayed.
  const oldest = log.oldestRetained(orgId);
  const entries = log.range(orgId, Math.max(replay.cursor, oldest - 1), upTo, REPLAY_PAGE_SIZE);
  // A seq missing from the log is waited for only while the seq order may still publish it (it was
  // skipped); one that was published and then removed (a sandbox reset, a trim) never comes. Only
  // the skipped ones are looked at: a reset can leave millions of seqs missing between two entries.
  const lastSeq = entries.at(-1)?.seq;
  const skippedSeqs = lastSeq === undefined ? [] : [...skipped.between(Math.max(replay.cursor, oldest - 1), lastSeq)].sort((a, b) => a - b);
  let nextSkipped = 0;
  const frames: Uint8Array[] = [];
  let bytes = 0;
  const full = (): Page => ({ frames, caughtUp: false, gapsFull: true });
  for (const update of entries) {
    if (bytes >= budget) return { frames, caughtUp: false };
    for (; nextSkipped < skippedSeqs.length && skippedSeqs[nextSkipped]! <= update.seq; nextSkipped++) {
      const missing = skippedSeqs[nextSkipped]!;
      if (missing === update.seq || replay.gaps.has(missing)) continue;
      if (replay.gaps.size >= MAX_REMEMBERED_GAPS) return full();
      replay.gaps.add(missing);
    }
    if (skipped.isSkipped(update.seq)) {
      if (!replay.gaps.has(update.seq) && replay.gaps.size >= MAX_REMEMBERED_GAPS) return full();
      replay.cursor = update.seq;
      replay.gaps.add(update.seq);
      continue;
    }
    replay.cursor = update.seq;
    if (!isInRoom(update, replay.room) || wasSent(replay.earlier, update)) continue;
    const frame = encodeLiveMessage({ run_update: update });
    frames.push(frame);
    bytes += frame.byteLength;
  }
  return { frames, caughtUp: entries.length < REPLAY_PAGE_SIZE };
}
