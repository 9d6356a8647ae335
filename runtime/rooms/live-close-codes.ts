// The close codes of the live rooms, the part of their contract a client acts on: which to
// reconnect after, which to reload after, which end the subscription (README, "Live rooms").

/**
 * A frame that is not a ClientMessage ends the socket with 1002. A slow consumer is closed with
 * 4008 when the heartbeat sees half the backpressure budget queued, or its reader stalled, or when
 * it holds the most of an org past its share of the live queue, or of the org holding the most
 * while all orgs pass its total (live-queue.ts); or it is dropped by
 * uWS (1006, no close frame) the moment a message would exceed the budget; either way it reconnects
 * with `after_seq`.
 */
export const CLOSE_PROTOCOL_ERROR = 1002;
/** More Subscribe frames than a socket may send (live-rooms.ts, SUBSCRIBE_BURST and SUBSCRIBE_PER_SECOND). */
export const CLOSE_POLICY_VIOLATION = 1008;
export const CLOSE_SLOW_CONSUMER = 4008;
/** Sent to every socket opened with an API key when the key is revoked, and to any frame sent after. */
export const CLOSE_KEY_REVOKED = 4401;
/** Sent to every socket of an org when the org is deleted: do not reconnect. */
export const CLOSE_ORG_DELETED = 4404;
/** Sent when a starter-plan org subscribes to the sandbox environment. */
export const CLOSE_SANDBOX_DISABLED = 4402;
/**
 * Sent to the org's sandbox sockets when its sandbox is reset, and to a later sandbox subscription
 * from a position before the reset: the runs they show are gone.
 */
export const CLOSE_SANDBOX_RESET = 4409;
/**
 * Updates the socket still needed left the retained log (asked with an after_seq older than the
 * retention, or overtaken by new updates while its replay waited for the client to read): reload
 * state over the REST API, then reconnect without after_seq.
 */
export const CLOSE_REPLAY_GONE = 4410;
