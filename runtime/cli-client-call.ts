// One call of a CLI command built on the REST client (explain, replay, failed, resume, cancel): a
// client for the target, the command's work, and its text on stdout (exit 0); or why the call
// failed, on one printable line on stderr (exit 1): Sluice's own answer (status, code, message), the
// network's, or an answer whose fields are not Sluice's (a TypeError while reading them); an
// argument the client would not send (an empty id) exits 2. Anything else is a bug and is thrown on.
// Each retry is said on stderr before its wait.

import type { Writable } from 'node:stream';
import { SluiceApiError, SluiceArgumentError, SluiceClient, SluiceNetworkError, type RetryNotice } from '../kits/client/index.ts';
import type { ApiTarget, ClientCommandIo } from './cli-api-target.ts';
import { printable } from './terminal-text.ts';
import { EXIT_FAILED, EXIT_USAGE } from './cli-exit-codes.ts';

/** The failure as one printable line (a proxy's error page may hold anything). */
export function clientFailure(error: unknown): string {
  if (error instanceof SluiceApiError) return printable(`${error.status} ${error.code}: ${error.message}`);
  if (error instanceof SluiceNetworkError || error instanceof SluiceArgumentError) return printable(`${error.code}: ${error.message}`);
  throw error;
}

/**
 * What a command prints on stderr before it tries a call again: a server that accepts connections
 * and never answers otherwise held a read for 5 attempts of 30 s each with nothing said.
 */
export const retryNotices = (command: string, stderr: Writable) => (retry: RetryNotice): void =>
  void stderr.write(`sluice ${command}: ${printable(`${retry.what}: ${retry.reason} (attempt ${retry.attempt} of ${retry.attempts}); trying again in ${(retry.waitMs / 1000).toFixed(1)} s`)}\n`);

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

/** fetch's reasons for a call that never reached a server: nothing was sent. */
const NOT_SENT: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** The code of the reason fetch gave for a network failure (`connect ECONNREFUSED …`'s ECONNREFUSED), if any. */
const reasonCode = (error: SluiceNetworkError): string | undefined => (error.cause as { cause?: { code?: string } } | undefined)?.cause?.code;

/** What a command says when nothing answered at `url` (escaped: it is what the user typed). */
export const nothingAnsweredAt = (url: string): string => printable(`Nothing answered at ${url}: is Sluice running there?`);

/**
 * What a network failure leaves to check: nothing answered at the url (is Sluice running there?),
 * or, for a command that changes something and whose request may have reached Sluice (a connection
 * cut, no answer in time), that it may have been carried out.
 */
function networkAdvice(command: string, error: SluiceNetworkError, url: string): string {
  const code = reasonCode(error);
  const notSent = code !== undefined && NOT_SENT.has(code);
  // An attempt before the last (a keyed replay is retried) may have reached Sluice.
  const mayHaveReached = !notSent || error.attempts > 1;
  return [
    ...(notSent ? [` ${nothingAnsweredAt(url)}`] : []),
    ...(WRITES.has(command) && mayHaveReached ? [` The ${command} may have been carried out all the same: look (sluice explain) before sending it again.`] : []),
  ].join('');
}

/**
 * Runs `work` with a client for `target` and prints the text it answers. `inOwnWords` tells a
 * refusal that the command's own flags answer in the command's words (`--again`, not the API's
 * `"again": true`); any other refusal is printed as Sluice sent it.
 */
export async function callAndPrint(command: string, target: ApiTarget, io: ClientCommandIo, work: (client: SluiceClient) => Promise<string>, inOwnWords: (refusal: SluiceApiError) => string | undefined = () => undefined): Promise<number> {
  let client: SluiceClient;
  try {
    client = new SluiceClient({ url: target.url, apiKey: target.apiKey, org: target.org, onRetry: retryNotices(command, io.stderr) });
  } catch (error) {
    // A url, key or org the client would not send (a query in the url, an org of "."): nothing was done.
    if (!(error instanceof TypeError)) throw error;
    io.stderr.write(`sluice ${command}: ${printable(`invalid_argument: ${error.message}`)}\n`);
    return EXIT_USAGE;
  }
  let text: string;
  try {
    text = await work(client);
  } catch (error) {
    io.stderr.write(`sluice ${command}: ${failureLine(command, error, target.url, inOwnWords)}\n`);
    // An argument the client would not send (an empty run id) is refused before anything is sent.
    return error instanceof SluiceArgumentError ? EXIT_USAGE : EXIT_FAILED;
  }
  io.stdout.write(`${text}\n`);
  return 0;
}

/** Why the call failed, on one printable line. */
function failureLine(command: string, error: unknown, url: string, inOwnWords: (refusal: SluiceApiError) => string | undefined): string {
  if (error instanceof SluiceApiError) {
    const own = inOwnWords(error);
    // An answer that is not Sluice's (a proxy's 504 page, HTML under 200): the request may have
    // reached Sluice behind it, as one cut off on its way may have.
    const notSluice = (error.code === 'http_error' || error.code === 'invalid_answer') && WRITES.has(command);
    const carriedOut = notSluice ? ` The ${command} may have been carried out all the same: look (sluice explain) before sending it again.` : '';
    return own === undefined ? `${clientFailure(error)}${carriedOut}` : printable(`${error.status} ${error.code}: ${own}`);
  }
  if (error instanceof SluiceNetworkError) return `${clientFailure(error)}${networkAdvice(command, error, url)}`;
  return error instanceof TypeError && !(error instanceof SluiceArgumentError) ? misshapenAnswer(command, error) : clientFailure(error);
}
