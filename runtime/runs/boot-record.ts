// How the previous processes on this data dir ended, kept durably so that boot recovery can tell a
// crash from a clean stop or a start cut off (RestartCause): only crashes count toward failing a
// step that keeps being interrupted (run-progress.ts, MAX_ABANDONED_IN_A_ROW).

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
   * start and never sent: that process had ended before they began (told by the wall clock).
   */
  readonly cutOffSince: number | null;
}

const KEY = 'last';

/** What boot recovery needs to know of this start: its recovery time, how to tell each open attempt's restart, and when it first sends. */
export interface BootRecovery {
  /** The time of this start's recovery: every attempt it claims has it as claimedAt. */
  readonly nowMs: number;
  /** How the process that claimed an attempt still open, at `claimedAt`, ended. */
  readonly causeOf: (claimedAt: number) => RestartCause;
  /**
   * Awaited before each step's effect goes out (a webhook sent, a custom action invoked): the first
   * call records that this start sends (durably; later calls share it, and one that failed is tried
   * again). Until then nothing of this start went out, whatever it claimed.
   */
  readonly beforeFirstEffect: () => Promise<void>;
  /** Records a clean stop, once the run engine is closed: the attempts it leaves open are no step's fault. A start that sent nothing stays cut off. */
  readonly cleanStop: () => Promise<void>;
}

/**
 * Opens this start's record: reads how the previous processes ended, then records durably, before
 * recovery writes anything, that this start has not yet sent anything (so a start killed during its
 * recovery, or before its first step went out, is told apart from a crash of a process sending steps).
 */
export async function beginBoot(ledger: Ledger, nowMs: number): Promise<BootRecovery> {
  const table = ledger.openDatabase('runtime-boots');
  const previous = table.get(KEY) as Partial<BootState> | undefined;
  const ended = previous?.ended ?? 'serving';
  const cutOffSince = typeof previous?.cutOffSince === 'number' ? previous.cutOffSince : null;
  const write = async (state: BootState): Promise<void> => void (await durably(ledger.root, ledger.root.transaction(() => void table.put(KEY, state))));
  await write({ ended, cutOffSince: cutOffSince ?? nowMs });
  let sending: Promise<void> | undefined;
  return {
    nowMs,
    causeOf: (claimedAt) => (cutOffSince !== null && claimedAt >= cutOffSince ? 'start_cut_off' : ended === 'stopped' ? 'stopped' : 'crashed'),
    beforeFirstEffect: () =>
      (sending ??= write({ ended: 'serving', cutOffSince: null }).catch((error: unknown) => {
        sending = undefined;
        throw error;
      })),
    // Nothing sent: the record already says this start was cut off, which its attempts were.
    cleanStop: async () => (sending === undefined ? undefined : write({ ended: 'stopped', cutOffSince: null })),
  };
}
