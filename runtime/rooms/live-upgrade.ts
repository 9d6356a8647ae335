// Who may open a live room and what they asked for, decided at the WebSocket upgrade, with each
// refusal worded as the REST API words it; and the answer to a plain GET of the room's path.

import type { Principal } from '../auth/authorize.ts';
import { AccessError, InputError, notFound } from '../errors.ts';
import type { Route } from '../http/types.ts';
import { upgradeRequiredRoute } from '../http/upgrade-required.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { parseSubscribeQuery, SubscriptionError, type Subscription } from './live-subscription.ts';

/** The WebSocket subprotocol of live rooms; the API key may ride as a second entry beside it. */
export const LIVE_PROTOCOL = 'sluice-live';

/**
 * 400 for subprotocols offered without LIVE_PROTOCOL (the server would have to echo one of them,
 * the key, in its answer). Before the key is read from them: ['<key>'] with ?token= would read as
 * two tokens that conflict.
 */
export function assertLiveProtocolOffered(offered: readonly string[]): void {
  if (offered.length > 0 && !offered.includes(LIVE_PROTOCOL)) {
    throw new InputError(400, 'invalid_subprotocol', `Offer the subprotocol ${LIVE_PROTOCOL} (the API key may ride next to it).`);
  }
}

/**
 * What an upgrade asks for, once its caller may have it; otherwise the refusal, as the REST API
 * words it (after assertLiveProtocolOffered): 401 without a valid key, 404 for another org's (or no) org, 400 for a
 * malformed subscription, 402 for the sandbox on a plan without one.
 */
export function admitUpgrade(
  principal: Principal | undefined,
  org: Organization | undefined,
  orgId: string,
  query: URLSearchParams,
): { principal: Principal; requested: Subscription } {
  if (principal === undefined) throw new AccessError(401, 'unauthorized', `A valid API key is required: ?token=<key>, or a Sec-WebSocket-Protocol entry next to ${LIVE_PROTOCOL}.`);
  if (org === undefined || (principal.kind !== 'platform_admin' && principal.orgId !== orgId)) throw notFound('Organization');
  let requested: Subscription;
  try {
    requested = parseSubscribeQuery(query);
  } catch (error) {
    if (error instanceof SubscriptionError) throw new InputError(400, 'invalid_subscription', error.message, { field: error.field });
    throw error;
  }
  assertSandboxAllowed(org, requested.room.environment);
  return { principal, requested };
}

/** The live room's path pattern (uWS's and the router's; the request histogram's route label). */
export const LIVE_PATH = '/organizations/:org_id/live';

/** What a GET of the live room that does not ask to upgrade is told. */
export const LIVE_PLAIN_GET = `This is a WebSocket endpoint: open it with a WebSocket client (subprotocol ${LIVE_PROTOCOL}).`;

/** A plain GET of the live room (no WebSocket upgrade) is told what the endpoint is. */
export const liveUpgradeRequired: Route = upgradeRequiredRoute(LIVE_PATH, '/organizations/<org>/live', LIVE_PLAIN_GET);
