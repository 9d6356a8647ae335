// How the previous processes on this data dir ended, kept durably so that boot recovery can tell a
// crash from a clean stop or a start cut off (RestartCause): only crashes count toward failing a
// step that keeps being interrupted (run-progress.ts, MAX_ABANDONED_IN_A_ROW). A clean stop also
// records the attempts it left open that had sent nothing (attempts-out.ts), so that their runs say
// so instead of "unknown".

import type { RestartCause } from '../../actors/run-types.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';

/** The record: how the last process that sent a step ended, and since when the starts after it sent nothing. */
interface BootState {
  /** `serving`: it had sent a step's effect when last heard of (it is still running, or it died); `stopped`: it stopped cleanly. */
  readonly ended: 'serving' | 'stopped';
  /**
   * The recovery time of the first start after it that was cut off (died, or stopped, before it sent
   * anything), or null. Every attempt claimed since (claimedAt at or after it) was claimed by such a
   * start and never sent: that process had ended before they began (told by the wall clock, which
   * a start keeps past the attempts left open: beginBoot).
   */
  readonly cutOffSince: number | null;
  /**
   * Of a clean stop (`stopped`): the attempts it left open that had sent nothing, as [run key
   * (orgScopedKey), fence], at most MAX_UNSENT_AT_STOP. Kept until a start sends (by then its
   * recovery has closed them all).
   */
  readonly unsentAtStop?: ReadonlyArray<readonly [string, number]>;
}

const KEY = 'last';

/**
 * The most attempts a clean stop records as not sent (about 60 bytes each, written in one record
 * while the disk may be below its floor); those past it read as "unknown", as before the record.
 */
export const MAX_UNSENT_AT_STOP = 10_000;

const attemptKey = (runKey: string, fence: number): string => `${fence}\u0000${runKey}`;

const isAttemptEntry = (entry: unknown): entry is readonly [string, number] => Array.isArray(entry) && typeof entry[0] === 'string' && typeof entry[1] === 'number';

/** What boot recovery needs to know of this start: its recovery time, how to tell each open attempt's restart, and when it first sends. */
export interface BootRecovery {
  /** The time of this start's recovery (the clock's, or just past the latest open attempt's claimedAt if later): every attempt it claims has it as claimedAt. */
  readonly nowMs: number;
  /** How the process that claimed an attempt still open, at `claimedAt`, under `fence` of the run `runKey` (orgScopedKey), ended. */
  readonly causeOf: (claimedAt: number, runKey?: string, fence?: number) => RestartCause;
  /**
   * Awaited before each step's effect goes out (a webhook sent, a custom action invoked): the first
   * call records that this start sends (durably; later calls share it, and one that failed is tried
   * again). Until then nothing of this start went out, whatever it claimed.
   */
  readonly beforeFirstEffect: () => Promise<void>;
  /**
   * Records a clean stop, once the run engine is closed and nothing can go out any more: the
   * attempts it leaves open are no step's fault, and those in `unsent` ([run key, fence]) sent
   * nothing. A start that sent nothing stays cut off.
   */
  readonly cleanStop: (unsent?: ReadonlyArray<readonly [string, number]>) => Promise<void>;
}

/**
 * Opens this start's record: reads how the previous processes ended, then records durably, before
 * recovery writes anything, that this start has not yet sent anything (so a start killed during its
 * recovery, or before its first step went out, is told apart from a crash of a process sending steps).
 * `latestClaimedAt`: the latest claimedAt of the attempts left open, which recovery has read. This
 * start's time is kept past it, so that every attempt an earlier process claimed stays before the
 * cut-off mark even when the wall clock was set back since (a start killed before it rewrote those
 * runs would otherwise have them read as its own, "nothing sent", when they may have gone out).
 * What this start claims after its recovery is dated by the clock, before that mark then: cut off,
 * those attempts read as `crashed`, the safe side (they never read as "nothing sent" when sent).
 * Dating them past the mark instead would move their timers (retries, delays) as far.
 */
export async function beginBoot(ledger: Ledger, clockMs: number, latestClaimedAt = -Infinity): Promise<BootRecovery> {
  const nowMs = Math.max(clockMs, latestClaimedAt + 1);
  const table = ledger.openDatabase('runtime-boots');
  const previous = table.get(KEY) as Partial<BootState> | undefined;
  const ended = previous?.ended ?? 'serving';
  const cutOffSince = typeof previous?.cutOffSince === 'number' ? previous.cutOffSince : null;
  const unsentAtStop = ended === 'stopped' && Array.isArray(previous?.unsentAtStop) ? previous.unsentAtStop.filter(isAttemptEntry) : [];
  const unsent = new Set(unsentAtStop.map(([runKey, fence]) => attemptKey(runKey, fence)));
  const write = async (state: BootState): Promise<void> => void (await durably(ledger.root, ledger.root.transaction(() => void table.put(KEY, state))));
  // A start cut off before it sends leaves the stop's attempts open: the record keeps them.
  await write({ ended, cutOffSince: cutOffSince ?? nowMs, ...(unsentAtStop.length === 0 ? {} : { unsentAtStop }) });
  let sending: Promise<void> | undefined;
  const stoppedCause = (runKey: string | undefined, fence: number | undefined): RestartCause =>
    runKey !== undefined && fence !== undefined && unsent.has(attemptKey(runKey, fence)) ? 'stopped_unsent' : 'stopped';
  return {
    nowMs,
    causeOf: (claimedAt, runKey, fence) =>
      cutOffSince !== null && claimedAt >= cutOffSince ? 'start_cut_off' : ended === 'stopped' ? stoppedCause(runKey, fence) : 'crashed',
    beforeFirstEffect: () =>
      (sending ??= write({ ended: 'serving', cutOffSince: null }).catch((error: unknown) => {
        sending = undefined;
        throw error;
      })),
    // Nothing sent: the record already says this start was cut off, which its attempts were.
    cleanStop: async (unsentNow = []) =>
      sending === undefined ? undefined : write({ ended: 'stopped', cutOffSince: null, unsentAtStop: unsentNow.slice(0, MAX_UNSENT_AT_STOP) }),
  };
}
