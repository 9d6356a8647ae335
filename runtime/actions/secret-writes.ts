// The writes of custom action secrets in flight (the hook-runner's copy, then Sluice's record of its
// name): one at a time per secret, since a PUT and a DELETE interleaved left Sluice naming a secret
// the runner no longer held; and known per org, so that an org's deletion (org-deletion.ts) waits
// for the writes that passed their org check before it was fenced off, then lists what the runner
// holds: one still being written when it listed would be left there.

import { KeyedSerial } from '../keyed-serial.ts';

export class SecretWrites {
  readonly #serial = new KeyedSerial();
  /** Per org, the writes queued or running. */
  readonly #inFlight = new Map<string, Set<Promise<unknown>>>();

  /** Runs `write` once every earlier write of the same secret has settled; answers its result. */
  run<T>(orgId: string, actionId: string, key: string, write: () => Promise<T>): Promise<T> {
    const result = this.#serial.run(`${orgId}\u0000${actionId}\u0000${key}`, write);
    let ofOrg = this.#inFlight.get(orgId);
    if (ofOrg === undefined) this.#inFlight.set(orgId, (ofOrg = new Set()));
    const settled = result.then(
      () => undefined,
      () => undefined,
    );
    ofOrg.add(settled);
    void settled.then(() => {
      ofOrg.delete(settled);
      if (ofOrg.size === 0 && this.#inFlight.get(orgId) === ofOrg) this.#inFlight.delete(orgId);
    });
    return result;
  }

  /** Resolves once no write of the org is queued or running. */
  async settled(orgId: string): Promise<void> {
    for (let ofOrg = this.#inFlight.get(orgId); ofOrg !== undefined && ofOrg.size > 0; ofOrg = this.#inFlight.get(orgId)) await Promise.all(ofOrg);
  }
}
