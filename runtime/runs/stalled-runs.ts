// Runs whose last transition could not be written (a full disk, a failed commit). The engine
// forgets their in-memory actor and picks each up again from its durable snapshot after a pause
// that doubles with every failure in a row (ledger/write-retries.ts): a queued run queues again, a
// step whose answer could not be written has that answer written again (the engine keeps it: the
// step is not sent twice), a step attempt whose answer was lost (a failed read) is sent again under
// the same fence and idempotency key, a timer is armed again.

import { WriteRetries } from '../ledger/write-retries.ts';

export { FIRST_RETRY_MS, MAX_RETRY_MS } from '../ledger/write-retries.ts';

/** Keyed by the run's org-scoped key; `size` is how many runs are stalled now. */
export class StalledRuns extends WriteRetries {}
