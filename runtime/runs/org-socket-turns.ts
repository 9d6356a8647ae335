// Whose turn it is for the room a closed webhook socket frees, while orgs wait for the process's
// total (org-socket-share.ts): fair queuing over socket time. Each org has a finish on a virtual
// clock: the socket time it has been charged (each of its sockets' life while orgs waited, charged
// when the socket closes), plus, for the sockets it has open, its usual hold each (an average of
// its charged lives; until it has one, the process's, at most NEW_ORG_HOLD_MS). The waiting org whose next request would
// finish first gets the room, and the virtual clock moves up to where that request starts; an org
// never starts below the virtual clock, so time it spent waiting for nothing is no credit. So an
// org whose receiver answers in milliseconds goes before orgs whose receivers hold sockets for
// seconds, however many wait or keep coming; an org with a backlog is passed only by orgs whose
// finish is behind its own, which each socket they hold moves on; and an org that comes with a
// flood is charged for every socket it takes. Turns counted in sockets (each waiting org one in
// turn) let an org whose receiver answered at once through once per round of 3,000 slow orgs (20 s
// apart, a probe of 2026-12-06); two tries that counted use directly were reverted (org-socket-share.ts).
// Nothing is charged while no org waits (and at most the time since orgs began to wait, so a
// keep-alive socket that served for hours is not charged hours); an org is forgotten once it holds
// no socket and the virtual clock has reached its finish, and every idle one once no org waits.

import { MinHeap } from '../../actors/min-heap.ts';

/** How much one charged socket life moves an average hold (an org's, the process's). */
const HOLD_AVERAGE_WEIGHT = 0.2;

/**
 * The longest an org with no charged socket yet is taken to hold one (the process's average, when
 * less): its first request goes before orgs known to hold theirs longer, and one org that held
 * sockets for minutes does not make every newcomer wait as if it would too.
 */
export const NEW_ORG_HOLD_MS = 500;

interface OrgTurn {
  /** The end, on the virtual clock, of the socket time charged so far; undefined until first charged or given room. */
  finishMs: number | undefined;
  /** Its sockets' usual charged life (ms); undefined until one was charged. */
  holdMs: number | undefined;
  open: number;
}

/** An org that held no socket when its finish was still ahead of the virtual clock: forgotten once the clock gets there (sweepIdle). */
interface IdleAhead {
  readonly org: string;
  readonly finishMs: number;
}

export class OrgSocketTurns {
  readonly #orgs = new Map<string, OrgTurn>();
  /** Idle orgs ahead of the virtual clock, by finish: each is let go once the clock passes it, if still idle. */
  readonly #idleAhead = new MinHeap<IdleAhead>((a, b) => a.finishMs < b.finishMs);
  #virtualMs = 0;
  /** Every org's sockets' usual charged life: an org without its own is taken to hold that long (at most NEW_ORG_HOLD_MS). */
  #processHoldMs: number | undefined;

  /** Orgs kept (holding sockets, waiting, or idle ahead of the virtual clock). */
  get size(): number {
    return this.#orgs.size;
  }

  /** Sockets of `org` open now. */
  open(org: string): number {
    return this.#orgs.get(org)?.open ?? 0;
  }

  /** Where the next request of `org` would finish on the virtual clock, were it given room now: the waiting org with the least goes first. */
  nextFinishOf(org: string): number {
    const turn = this.#orgs.get(org);
    const hold = this.#holdOf(turn);
    return this.#startOf(turn, hold) + hold;
  }

  opened(org: string): void {
    this.#turn(org).open += 1;
  }

  /**
   * A socket of `org` closed; `chargedMs`: the part of its life to charge (while orgs waited), or
   * undefined when nothing is charged (no org waited, or its life is not known).
   */
  closed(org: string, chargedMs?: number): void {
    const turn = this.#turn(org);
    turn.open = Math.max(0, turn.open - 1);
    if (chargedMs === undefined) return;
    turn.finishMs = (turn.finishMs ?? this.#virtualMs) + chargedMs;
    turn.holdMs = averaged(turn.holdMs, chargedMs);
    this.#processHoldMs = averaged(this.#processHoldMs, chargedMs);
  }

  /** `org`, waiting, is given room: its request starts no earlier than the virtual clock, which moves up to that start. */
  given(org: string): void {
    const turn = this.#turn(org);
    const hold = this.#holdOf(turn);
    const start = this.#startOf(turn, hold);
    // What it has open ends at the start: no earlier (the time it waited for nothing is no credit).
    turn.finishMs = start - turn.open * hold;
    this.#virtualMs = start;
  }

  /**
   * Forgets `org` (the caller knows nothing of it waits) if it holds no socket and is not ahead of
   * the virtual clock; one ahead is let go once the clock passes its finish (sweepIdle).
   */
  forgetIfIdle(org: string): void {
    const turn = this.#orgs.get(org);
    if (turn === undefined || turn.open > 0) return;
    if ((turn.finishMs ?? 0) <= this.#virtualMs) this.#orgs.delete(org);
    else this.#idleAhead.push({ org, finishMs: turn.finishMs as number });
  }

  /** Lets go the idle orgs the virtual clock has passed, unless they hold a socket again or wait (`waits`). */
  sweepIdle(waits: (org: string) => boolean): void {
    for (let idle = this.#idleAhead.pop(); idle !== undefined; idle = this.#idleAhead.pop()) {
      if (idle.finishMs > this.#virtualMs) {
        this.#idleAhead.push(idle);
        return;
      }
      const turn = this.#orgs.get(idle.org);
      if (turn !== undefined && turn.open === 0 && turn.finishMs === idle.finishMs && !waits(idle.org)) this.#orgs.delete(idle.org);
    }
  }

  /** No org waits any more (nothing to take turns for): forgets every org that holds no socket, but `keep`. */
  forgetAllIdle(keep?: string): void {
    for (const [org, turn] of this.#orgs) if (turn.open === 0 && org !== keep) this.#orgs.delete(org);
    this.#idleAhead.clear();
  }

  #holdOf(turn: OrgTurn | undefined): number {
    return turn?.holdMs ?? Math.min(this.#processHoldMs ?? 0, NEW_ORG_HOLD_MS);
  }

  /** Where a request of the org would start: after what it has charged and has open, and not before the virtual clock. */
  #startOf(turn: OrgTurn | undefined, hold: number): number {
    if (turn === undefined) return this.#virtualMs;
    return Math.max(this.#virtualMs, (turn.finishMs ?? this.#virtualMs) + turn.open * hold);
  }

  #turn(org: string): OrgTurn {
    let turn = this.#orgs.get(org);
    if (turn === undefined) {
      turn = { finishMs: undefined, holdMs: undefined, open: 0 };
      this.#orgs.set(org, turn);
    }
    return turn;
  }
}

const averaged = (average: number | undefined, sample: number): number => (average === undefined ? sample : average + HOLD_AVERAGE_WEIGHT * (sample - average));
