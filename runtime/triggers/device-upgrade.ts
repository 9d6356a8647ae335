// Who may open a device socket, decided at the WebSocket upgrade with each refusal worded as the
// REST API words it; and the answer to a plain GET of a device socket's path.

import { constantTimeEqual, hashToken } from '../auth/secrets.ts';
import { randomBytes } from 'node:crypto';
import { AccessError, InputError } from '../errors.ts';
import type { Route } from '../http/types.ts';
import { upgradeRequiredRoute } from '../http/upgrade-required.ts';
import { upgradeToken } from '../http/upgrade-token.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { DeviceHead } from './device-record.ts';

/** The WebSocket subprotocol of device sockets; the device token may ride as a second entry beside it. */
export const DEVICE_PROTOCOL = 'sluice-device';

/** What an upgrade request carries: the subprotocols it offers and the `?token=` query value, if any. */
export interface DeviceUpgrade {
  readonly offered: readonly string[];
  readonly queryToken: string | null;
}

/** Compared against when the org or device does not exist, so that case costs what a wrong token does. */
const NO_DEVICE_HASH = hashToken(randomBytes(32).toString('hex'));

/**
 * The device the upgrade may open, or the refusal: 400 for subprotocols without ours (the one
 * answered would be the token), 401 without the device's current token, or for an org or device
 * that does not exist (the same answer, so names cannot be probed without a token), 402 for a
 * sandbox device on a plan without one.
 */
export function admitDevice(upgrade: DeviceUpgrade, org: Organization | undefined, device: DeviceHead | undefined): DeviceHead {
  if (upgrade.offered.length > 0 && !upgrade.offered.includes(DEVICE_PROTOCOL)) {
    throw new InputError(400, 'invalid_subprotocol', `Offer the subprotocol ${DEVICE_PROTOCOL} (the token may ride next to it).`);
  }
  const token = upgradeToken(upgrade.queryToken, upgrade.offered, DEVICE_PROTOCOL);
  const current = org === undefined || device === undefined ? NO_DEVICE_HASH : device.token_hash;
  const matches = token !== undefined && constantTimeEqual(hashToken(token), current);
  if (!matches || org === undefined || device === undefined) {
    throw new AccessError(401, 'unauthorized', `The device's token is required and must be current: ?token=<token>, or a Sec-WebSocket-Protocol entry next to ${DEVICE_PROTOCOL}.`);
  }
  assertSandboxAllowed(org, device.environment);
  return device;
}

/** A device socket's path pattern (uWS's and the router's; the request histogram's route label). */
export const DEVICE_PATH = '/devices/:org_id/:device';

/** What a GET of a device socket path that does not ask to upgrade is told. */
export const DEVICE_PLAIN_GET = `This is a device WebSocket endpoint: open it with a WebSocket client (subprotocol ${DEVICE_PROTOCOL}) and the device's token.`;

/** A plain GET of a device socket path (no WebSocket upgrade) is told what the endpoint is. */
export const deviceUpgradeRequired: Route = upgradeRequiredRoute(DEVICE_PATH, '/devices/<org>/<device name>', DEVICE_PLAIN_GET);
