// What a live socket asks for: its room (environment, optionally one run) and the seq its replay
// starts after, read from the upgrade URL or from a Subscribe frame; and which updates a room holds.

import type { RunUpdate, Subscribe } from './live-codec.ts';

const ENVIRONMENTS = new Set(['production', 'sandbox']);
const MAX_RUN_ID_LENGTH = 200;

export interface Room {
  readonly environment: string;
  /** '' for every run of the environment. */
  readonly runId: string;
}

export interface Subscription {
  readonly room: Room;
  /** Replay retained updates with a higher seq before joining; undefined: live updates only, from now. */
  readonly afterSeq: number | undefined;
}

export const topicFor = (orgId: string, room: Room): string =>
  room.runId === '' ? `live/${orgId}/${room.environment}` : `live/${orgId}/${room.environment}/run/${room.runId}`;

export const isInRoom = (update: RunUpdate, room: Room): boolean =>
  update.environment === room.environment && (room.runId === '' || update.run_id === room.runId);

/** True when every update of `inner` is also one of `outer` (same environment; all runs or the same run). */
export const isRoomWithin = (inner: Room, outer: Room): boolean =>
  inner.environment === outer.environment && (outer.runId === '' || outer.runId === inner.runId);

function parseRoom(environment: string, runId: string): Room {
  const room = { environment: environment === '' ? 'production' : environment, runId };
  if (!ENVIRONMENTS.has(room.environment)) throw new Error('unknown environment');
  if (runId.length > MAX_RUN_ID_LENGTH) throw new Error('run_id too long');
  return room;
}

/** The subscription of a Subscribe frame; throws on an unknown environment or an over-long run id. */
export function parseSubscribeFrame(subscribe: Subscribe): Subscription {
  return { room: parseRoom(subscribe.environment, subscribe.run_id), afterSeq: subscribe.after_seq };
}

/**
 * The subscription of an upgrade URL: the Subscribe fields as query parameters (`environment`,
 * `run_id`, `after_seq`), all optional. Throws on a value a Subscribe frame could not carry.
 */
export function parseSubscribeQuery(query: URLSearchParams): Subscription {
  const room = parseRoom(query.get('environment') ?? '', query.get('run_id') ?? '');
  const afterSeq = query.get('after_seq');
  if (afterSeq === null) return { room, afterSeq: undefined };
  if (!/^\d{1,15}$/.test(afterSeq)) throw new Error('after_seq must be a sequence number');
  return { room, afterSeq: Number(afterSeq) };
}
