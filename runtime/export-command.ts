// `sluice export`: writes an organization's export (GET /organizations/:org/export, admin role) to
// stdout as JSON lines, page after page, ending with `{"kind":"end"}`: a file without that last line
// is cut short. A failure names the cursor to go on from (`--cursor`, output appended with >>), so a
// large export never starts over. What the lines hold: README "Export an organization".

import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { SluiceApiError, SluiceClient } from '../kits/client/index.ts';
import { API_TARGET_OPTIONS, apiTargetOf, type ClientCommandIo } from './cli-api-target.ts';
import { clientFailure } from './cli-client-call.ts';
import { InputError } from './errors.ts';
import { printable } from './terminal-text.ts';

const USAGE = 'usage: sluice export <http://host:port> --org <org id> [--key <admin API key>, or SLUICE_API_KEY] [--cursor <cursor to go on from>] > org.ndjson';

/** Records asked for per page: the API's largest page. */
const PAGE_SIZE = 500;

/** Waits until `output` takes more (or is gone: nobody reads any more). */
async function drained(output: Writable): Promise<void> {
  if (!output.writableNeedDrain || output.destroyed) return;
  await Promise.race([once(output, 'drain'), once(output, 'close')]);
}

/** Writes every page (exit 0), or says why the export stopped and where to go on from (exit 1). */
export async function exportCommand(args: readonly string[], io: ClientCommandIo): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...args], strict: true, allowPositionals: true, options: { ...API_TARGET_OPTIONS, cursor: { type: 'string' } } });
  if (values.environment !== undefined) throw new InputError(400, 'usage', `An export holds every environment: --environment does not apply. ${USAGE}`);
  const target = apiTargetOf(values, positionals, io.env ?? {}, USAGE);
  if (values.cursor === '') throw new InputError(400, 'usage', `--cursor is empty. ${USAGE}`);
  const client = new SluiceClient({ url: target.url, apiKey: target.apiKey, org: target.org });
  let lines = 0;
  let cursor = values.cursor;
  try {
    for await (const page of client.exportPages({ pageSize: PAGE_SIZE, ...(cursor === undefined ? {} : { cursor }) })) {
      // Nobody reads any more (`| head`): nothing more is asked for.
      if (io.stdout.destroyed) return 0;
      io.stdout.write(page.lines.map((line) => `${line}\n`).join(''));
      lines += page.lines.length;
      cursor = page.next ?? undefined;
      await drained(io.stdout);
    }
  } catch (error) {
    const goOn = cursor === undefined ? '' : ` To go on from the page that failed, run again with --cursor ${cursor} and append (>>) to what was written.`;
    const refusal = error instanceof SluiceApiError && error.status === 403 ? ' (an export needs an admin key)' : '';
    io.stderr.write(`sluice export: ${clientFailure(error)}${refusal}; ${lines} lines were written.${goOn}\n`);
    return 1;
  }
  io.stderr.write(`sluice export: ${lines} lines of ${printable(target.org)} written.\n`);
  return 0;
}
