// Reply bodies a client has not yet read, held by this process: a reply the socket cannot take at
// once is sent as the client reads it (tryEnd and onWritable), and its bytes count here until it
// is sent or its client goes. A total, and a share of it per tenant (the org a path names): a
// tenant's clients that ask for large answers and never read them (16 MB event pages, a hundred
// of them) held gigabytes and stalled every org; past its share a tenant's requests are 503, and so
// is a read whose large answer would not fit (requests admitted together each add theirs).

import type { HttpResponse } from 'uWebSockets.js';
import { RetryableError } from '../errors.ts';
import { TenantByteShares } from '../tenancy/tenant-byte-shares.ts';

/** Bytes of unread reply bodies held at once, over all requests; one org's may hold an eighth. */
export const DEFAULT_UNSENT_REPLY_BYTES = 256 * 1024 * 1024;

/** Answers shorter than this (in characters, at most 3 bytes each) are not weighed against the share before they are sent. */
const SMALL_REPLY_CHARS = 64 * 1024;

/** What a request is answered while its org's unread replies fill its share. */
export const unreadRepliesError = (): RetryableError =>
  new RetryableError('server_busy', "This organization's clients have not read answers holding as much memory as it may hold; read them (or close those connections), then try again.", 1000);

export class UnsentReplies {
  readonly #shares: TenantByteShares;

  constructor(total = DEFAULT_UNSENT_REPLY_BYTES, perTenant = Math.floor(total / 8)) {
    this.#shares = new TenantByteShares(total, perTenant);
  }

  /** Bytes held now, over every tenant. */
  get held(): number {
    return this.#shares.held;
  }

  /** Whether `tenant` (and the total) has room for more: false while its unread replies fill its share. */
  hasRoom(tenant: string): boolean {
    return this.#shares.fits(tenant, 1);
  }

  /** Whether `bytes` more fit `tenant`'s room (and the total). */
  hasRoomFor(tenant: string, bytes: number): boolean {
    return this.#shares.fits(tenant, bytes);
  }

  /**
   * Whether `body` fits `tenant`'s room, should its client not read it at once. A body under
   * SMALL_REPLY_CHARS always does: the check costs its byte length (`bytes`, when the caller has
   * counted them already), and such answers add little.
   */
  mayHold(tenant: string, body: string | undefined, bytes?: number): boolean {
    return body === undefined || body.length < SMALL_REPLY_CHARS || this.#shares.fits(tenant, bytes ?? Buffer.byteLength(body));
  }

  /**
   * Ends `res` with `body` (its status and headers written, inside a cork): at once when the socket
   * takes it all, else as the client reads, counted for `tenant` meanwhile. Returns the function
   * that gives the bytes back should the client go first (its onAborted); a no-op when all went.
   */
  send(res: HttpResponse, body: string, tenant: string): () => void {
    const bytes = Buffer.byteLength(body);
    const start = res.getWriteOffset();
    const [, done] = res.tryEnd(body, bytes);
    if (done) return () => undefined;
    const rest = Buffer.from(body);
    this.#shares.hold(tenant, bytes);
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      this.#shares.give(tenant, bytes);
    };
    res.onWritable((offset) => {
      const [ok, finished] = res.tryEnd(rest.subarray(offset - start), bytes);
      if (finished) release();
      return ok;
    });
    return release;
  }
}
