// What a live socket asks for: its room (environment, optionally one run) and the seq its replay
// starts after, read from the upgrade URL or from a Subscribe frame; and which updates a room holds.

import type { RunUpdate, Subscribe } from './live-codec.ts';

const ENVIRONMENTS = new Set(['production', 'sandbox']);
const MAX_RUN_ID_LENGTH = 200;
/** An `after_seq` has at most this many digits (the client and `sluice watch` check it too). */
export const AFTER_SEQ_DIGITS = 15;
const AFTER_SEQ = new RegExp(`^\\d{1,${AFTER_SEQ_DIGITS}}$`);

export interface Room {
  readonly environment: string;
  /** '' for every run of the environment. */
  readonly runId: string;
}

export interface Subscription {
  readonly room: Room;
  /** Replay retained updates with a higher seq before joining; undefined: live updates only, from now. */
  readonly afterSeq: number | undefined;
  /** `afterSeq` is a position the client was sent, 0 included (live.proto `strict`); false: 0 asks for whatever is retained. */
  readonly strict: boolean;
}

export const topicFor = (orgId: string, room: Room): string =>
  room.runId === '' ? `live/${orgId}/${room.environment}` : `live/${orgId}/${room.environment}/run/${room.runId}`;

export const isInRoom = (update: RunUpdate, room: Room): boolean =>
  update.environment === room.environment && (room.runId === '' || update.run_id === room.runId);

/** True when every update of `inner` is also one of `outer` (same environment; all runs or the same run). */
export const isRoomWithin = (inner: Room, outer: Room): boolean =>
  inner.environment === outer.environment && (outer.runId === '' || outer.runId === inner.runId);

/** A subscription field a socket cannot have, said in a sentence that names it. */
export class SubscriptionError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

function parseRoom(environment: string, runId: string): Room {
  const room = { environment: environment === '' ? 'production' : environment, runId };
  if (!ENVIRONMENTS.has(room.environment)) throw new SubscriptionError('environment', 'environment must be "production" or "sandbox".');
  if (runId.length > MAX_RUN_ID_LENGTH) throw new SubscriptionError('run_id', `run_id must be at most ${MAX_RUN_ID_LENGTH} characters.`);
  return room;
}

const afterSeqRefused = (): SubscriptionError => new SubscriptionError('after_seq', `after_seq must be a sequence number (a whole number of at most ${AFTER_SEQ_DIGITS} digits).`);

/** The subscription of a Subscribe frame; throws on an unknown environment, an over-long run id or an after_seq the URL would refuse. */
export function parseSubscribeFrame(subscribe: Subscribe): Subscription {
  // A uint64 past 2^53 arrives rounded: refused, as the URL refuses more than AFTER_SEQ_DIGITS digits,
  // rather than answered about a number the client never sent.
  if (!Number.isSafeInteger(subscribe.after_seq) || subscribe.after_seq >= 10 ** AFTER_SEQ_DIGITS) throw afterSeqRefused();
  return { room: parseRoom(subscribe.environment, subscribe.run_id), afterSeq: subscribe.after_seq, strict: subscribe.strict === true };
}

/**
 * The subscription of an upgrade URL: the Subscribe fields as query parameters (`environment`,
 * `run_id`, `after_seq`, `strict`), all optional. Throws on a value a Subscribe frame could not carry.
 */
export function parseSubscribeQuery(query: URLSearchParams): Subscription {
  const room = parseRoom(query.get('environment') ?? '', query.get('run_id') ?? '');
  const strictText = query.get('strict');
  if (strictText !== null && strictText !== 'true' && strictText !== 'false') throw new SubscriptionError('strict', 'strict must be true or false.');
  const strict = strictText === 'true';
  const afterSeq = query.get('after_seq');
  if (afterSeq === null) {
    if (strict) throw new SubscriptionError('strict', 'strict applies to an after_seq; give one, or leave strict out.');
    return { room, afterSeq: undefined, strict };
  }
  if (!AFTER_SEQ.test(afterSeq)) throw afterSeqRefused();
  return { room, afterSeq: Number(afterSeq), strict };
}
