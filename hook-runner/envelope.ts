// The JSON envelope handed to a guest (DESIGN.md §6.5): {"payload","secrets","permissions","action"}.
// Tenant data is kept minimal: the action is named by id and module digest, the org is not included.
import type { ActionId, ModuleDigest } from './requests.ts';

export interface GuestEnvelopeInput {
  /** Already validated JSON text; embedded verbatim so numbers and key order reach the guest unchanged. */
  readonly payloadJson: string;
  /** Only secrets covered by a `read_secret:` permission that exist; none when simulating. */
  readonly secrets: Readonly<Record<string, string>>;
  readonly permissions: readonly string[];
  readonly actionId: ActionId;
  readonly digest: ModuleDigest;
}

export function createGuestEnvelope(input: GuestEnvelopeInput): string {
  return `{"payload":${input.payloadJson},"secrets":${JSON.stringify(input.secrets)},"permissions":${JSON.stringify(input.permissions)},"action":${JSON.stringify({ id: input.actionId, digest: input.digest })}}`;
}
