// How a CLI command built on the REST client says why a call failed: Sluice's own answer (status,
// code, message) or the network's; anything else is a bug and is thrown on.

import { SluiceApiError, SluiceNetworkError } from '../kits/client/index.ts';

export function clientFailure(error: unknown): string {
  if (error instanceof SluiceApiError) return `${error.status} ${error.code}: ${error.message}`;
  if (error instanceof SluiceNetworkError) return `${error.code}: ${error.message}`;
  throw error;
}
