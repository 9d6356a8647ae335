// `sluice export`: writes an organization's export (GET /organizations/:org/export, admin role) to
// stdout as JSON lines, page after page, ending with `{"kind":"end"}`: a file without that last line
// is cut short. A failure, or a stop (Ctrl-C: the page being written is finished first), names the
// cursor to go on from (`--cursor`, output appended with >>), so a large export never starts over.
// What the lines hold: README "Export an organization".

import type { Writable } from 'node:stream';
import { parseCommandArgs } from './cli-parse-args.ts';
import { SluiceApiError, SluiceClient } from '../kits/client/index.ts';
import { API_TARGET_OPTIONS, apiTargetOf, type ClientCommandIo } from './cli-api-target.ts';
import { clientFailure, retryNotices } from './cli-client-call.ts';
import { InputError } from './errors.ts';
import { printable } from './terminal-text.ts';

const USAGE = 'usage: sluice export <http://host:port> --org <org id> [--key <admin API key>, or SLUICE_API_KEY] [--cursor <cursor to go on from>] > org.ndjson';

/** Records asked for per page: the API's largest page. */
const PAGE_SIZE = 500;

/**
 * Writes `text` and resolves once `output` took it, or with why it could not: EPIPE when nobody
 * reads any more. (Stdout to a file writes synchronously, and its failure is thrown.)
 */
const written = (output: Writable, text: string): Promise<NodeJS.ErrnoException | null | undefined> =>
  new Promise((resolve) => {
    if (output.destroyed) return resolve(Object.assign(new Error('the output is closed'), { code: 'EPIPE' }));
    try {
      output.write(text, resolve);
    } catch (error) {
      resolve(error as NodeJS.ErrnoException);
    }
  });

/**
 * Writes every page (exit 0), or says why the export stopped and where to go on from (exit 1).
 * `stop`: aborted on SIGINT/SIGTERM/SIGHUP; the page under way is written whole before it ends.
 */
export async function exportCommand(args: readonly string[], io: ClientCommandIo, stop?: AbortSignal): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args: [...args], strict: true, allowPositionals: true, options: { ...API_TARGET_OPTIONS, cursor: { type: 'string' } } });
  if (values.environment !== undefined) throw new InputError(400, 'usage', `An export holds every environment: --environment does not apply. ${USAGE}`);
  const target = apiTargetOf(values, positionals, io.env ?? {}, USAGE);
  if (values.cursor === '') throw new InputError(400, 'usage', `--cursor is empty. ${USAGE}`);
  const client = new SluiceClient({ url: target.url, apiKey: target.apiKey, org: target.org, onRetry: retryNotices('export', io.stderr) });
  // Each write's failure comes to its callback (below); the error event it also raises is not a crash.
  io.stdout.on('error', () => undefined);
  let lines = 0;
  /** The cursor of the page being read or written: where a new run goes on from if it fails. */
  let cursor = values.cursor;
  // Escaped: a cursor given on the command line may hold anything.
  const goOn = (which = 'the page that failed'): string => (cursor === undefined ? '' : ` To go on from ${which}, run again with --cursor ${printable(cursor)} and append (>>) to what was written.`);
  const stopped = (): number => {
    io.stderr.write(`sluice export: stopped; ${lines} lines were written.${goOn('where it stopped')}\n`);
    return 1;
  };
  try {
    for await (const page of client.exportPages({ pageSize: PAGE_SIZE, ...(cursor === undefined ? {} : { cursor }) }, stop === undefined ? {} : { signal: stop })) {
      const failed = await written(io.stdout, page.lines.map((line) => `${line}\n`).join(''));
      // Nobody reads any more (`| head`): nothing more is asked for, as after any command cut short so.
      if (failed?.code === 'EPIPE') return 0;
      if (failed) {
        io.stderr.write(`sluice export: writing the output failed (${printable(failed.message)}); ${lines} lines were written before the page that failed, which may have been written in part: cut what follows the last of them.${goOn()}\n`);
        return 1;
      }
      lines += page.lines.length;
      cursor = page.next ?? undefined;
      if (stop?.aborted === true && cursor !== undefined) return stopped();
    }
  } catch (error) {
    if (stop?.aborted === true) return stopped();
    const refusal = error instanceof SluiceApiError && error.status === 403 ? ' (an export needs an admin key)' : '';
    // A refused cursor is no place to go on from: the advice would repeat the refusal.
    const next = error instanceof SluiceApiError && error.code === 'invalid_cursor' ? '' : goOn();
    // The failure's own sentence ends where this one goes on.
    io.stderr.write(`sluice export: ${clientFailure(error).replace(/\.$/, '')}${refusal}; ${lines} lines were written.${next}\n`);
    return 1;
  }
  io.stderr.write(`sluice export: ${lines} lines of ${printable(target.org)} written.\n`);
  return 0;
}
