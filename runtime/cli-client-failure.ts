// How a CLI command built on the REST client says why a call failed: Sluice's own answer (status,
// code, message) or the network's, on one printable line; anything else is a bug and is thrown on.

import { SluiceApiError, SluiceNetworkError } from '../kits/client/index.ts';
import { printable } from './terminal-text.ts';

/** The failure as one printable line (a proxy's error page may hold anything). */
export function clientFailure(error: unknown): string {
  if (error instanceof SluiceApiError) return printable(`${error.status} ${error.code}: ${error.message}`);
  if (error instanceof SluiceNetworkError) return printable(`${error.code}: ${error.message}`);
  throw error;
}
