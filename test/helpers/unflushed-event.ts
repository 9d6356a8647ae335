// Makes the next event write of one org commit and then fail its flush (EIO), as a disk that fails
// a sync does: the request is refused, its runs stay in the ledger and are picked up after the
// pause. Or holds that flush until the test lets it go, as a slow fsync does.

import type { Ledger, LedgerWrite } from '../../runtime/ledger/ledger.ts';

/** Gives `orgId`'s next event write on `ledger` the flush `flush(commit, flushed)` makes; returns what puts the ledger back. */
function replaceNextEventFlush(ledger: Ledger, orgId: string, flush: (commit: Promise<boolean>, flushed: PromiseLike<unknown> | undefined) => Promise<unknown>): () => void {
  const { events } = ledger;
  const ifNoExists = events.ifNoExists.bind(events);
  let replace = true;
  events.ifNoExists = (key, writes) => {
    const write = ifNoExists(key, writes);
    if (!replace || !Array.isArray(key) || key[0] !== orgId) return write;
    replace = false;
    const flushed = flush(write, write.flushed);
    flushed.catch(() => undefined);
    return Object.assign(write.then((took) => took), { flushed }) as LedgerWrite<boolean>;
  };
  return () => {
    events.ifNoExists = ifNoExists;
  };
}

/** Fails the flush of `orgId`'s next event write on `ledger`; returns what puts the ledger back. */
export function failNextEventFlush(ledger: Ledger, orgId: string): () => void {
  return replaceNextEventFlush(ledger, orgId, () => Promise.reject(new Error('EIO: fdatasync failed')));
}

/**
 * Holds the flush of `orgId`'s next event write on `ledger` once the write has committed, until
 * `release`; `committed` resolves then. `restore` puts the ledger back and lets a held flush go.
 */
export function holdNextEventFlush(ledger: Ledger, orgId: string): { readonly committed: Promise<void>; readonly release: () => void; readonly restore: () => void } {
  let arrive: () => void = () => undefined;
  const committed = new Promise<void>((resolve) => (arrive = resolve));
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  const putBack = replaceNextEventFlush(ledger, orgId, async (commit, flushed) => {
    await commit;
    arrive();
    await released;
    await (flushed ?? ledger.root.flushed);
  });
  return {
    committed,
    release,
    restore: () => {
      release();
      putBack();
    },
  };
}
