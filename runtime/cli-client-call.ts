// One call of a CLI command built on the REST client (explain, replay, failed, resume, cancel): a
// client for the target, the command's work, and its text on stdout (exit 0); or why the call
// failed, on one printable line on stderr (exit 1): Sluice's own answer (status, code, message), the
// network's, an argument the client would not send (an empty id), or an answer whose fields are not
// Sluice's (a TypeError while reading them). Anything else is a bug and is thrown on.

import { SluiceApiError, SluiceArgumentError, SluiceClient, SluiceNetworkError } from '../kits/client/index.ts';
import type { ApiTarget, ClientCommandIo } from './cli-api-target.ts';
import { printable } from './terminal-text.ts';

/** The failure as one printable line (a proxy's error page may hold anything). */
export function clientFailure(error: unknown): string {
  if (error instanceof SluiceApiError) return printable(`${error.status} ${error.code}: ${error.message}`);
  if (error instanceof SluiceNetworkError || error instanceof SluiceArgumentError) return printable(`${error.code}: ${error.message}`);
  throw error;
}

/** Commands whose call changes something: answered by something other than Sluice, it may have been carried out. */
const WRITES: ReadonlySet<string> = new Set(['resume', 'cancel', 'replay']);

/**
 * An answer that is JSON and names Sluice's member (`run`, `event`) but not the fields inside it the
 * text is made of: the client checked the member only, and reading the rest failed. Not Sluice's answer.
 */
function misshapenAnswer(command: string, error: TypeError): string {
  const carriedOut = WRITES.has(command) ? ` The ${command} may have been carried out all the same.` : '';
  return printable(`invalid_answer: the answer is JSON but not of Sluice's shape (${error.message}): is the url where Sluice listens?${carriedOut}`);
}

/**
 * Runs `work` with a client for `target` and prints the text it answers; `hint` adds to a refusal
 * what the command's own flags can do about it.
 */
export async function callAndPrint(command: string, target: ApiTarget, io: ClientCommandIo, work: (client: SluiceClient) => Promise<string>, hint: (refusal: SluiceApiError) => string = () => ''): Promise<number> {
  const client = new SluiceClient({ url: target.url, apiKey: target.apiKey, org: target.org });
  let text: string;
  try {
    text = await work(client);
  } catch (error) {
    io.stderr.write(`sluice ${command}: ${error instanceof TypeError && !(error instanceof SluiceArgumentError) ? misshapenAnswer(command, error) : clientFailure(error)}${error instanceof SluiceApiError ? hint(error) : ''}\n`);
    return 1;
  }
  io.stdout.write(`${text}\n`);
  return 0;
}
