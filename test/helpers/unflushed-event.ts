// Makes the next event write of one org commit and then fail its flush (EIO), as a disk that fails
// a sync does: the request is refused, its runs stay in the ledger and are picked up after the pause.

import type { Ledger, LedgerWrite } from '../../runtime/ledger/ledger.ts';

/** Fails the flush of `orgId`'s next event write on `ledger`; returns what puts the ledger back. */
export function failNextEventFlush(ledger: Ledger, orgId: string): () => void {
  const { events } = ledger;
  const ifNoExists = events.ifNoExists.bind(events);
  let failFlush = true;
  events.ifNoExists = (key, writes) => {
    const write = ifNoExists(key, writes);
    if (!failFlush || !Array.isArray(key) || key[0] !== orgId) return write;
    failFlush = false;
    const flushed = Promise.reject(new Error('EIO: fdatasync failed'));
    flushed.catch(() => undefined);
    return Object.assign(write.then((took) => took), { flushed }) as LedgerWrite<boolean>;
  };
  return () => {
    events.ifNoExists = ifNoExists;
  };
}
