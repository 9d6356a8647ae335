// `sluice replay`: a business replay of one event from the command line (POST .../replay), after the
// person chose --side-effects skip or run. Prints the new event and the runs it started. Without
// --idempotency-key nothing is retried, and the same replay again within 5 minutes is refused
// (409 replay_just_made) unless --again: running the command twice does not charge twice.

import { parseCommandArgs } from './cli-parse-args.ts';
import { API_TARGET_OPTIONS, apiTargetOf, type ClientCommandIo } from './cli-api-target.ts';
import { callAndPrint } from './cli-client-call.ts';
import type { SluiceApiError } from '../kits/client/index.ts';
import { InputError } from './errors.ts';
import { runLine } from './explain-text.ts';
import { printableLines } from './terminal-text.ts';

const USAGE =
  'usage: sluice replay <http://host:port> --org <org id> --event <event id> --side-effects skip|run [--workflow <workflow id>]... [--again] [--idempotency-key <key>] [--key <API key>, or SLUICE_API_KEY] [--environment production|sandbox]';

/** Makes the replay (exit 0), or prints why it was not made (exit 1). */
export async function replayCommand(args: readonly string[], io: ClientCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { ...API_TARGET_OPTIONS, event: { type: 'string' }, 'side-effects': { type: 'string' }, workflow: { type: 'string', multiple: true }, again: { type: 'boolean' }, 'idempotency-key': { type: 'string' } },
  });
  const target = apiTargetOf(values, positionals, io.env ?? {}, USAGE);
  if (values.event === undefined) throw new InputError(400, 'usage', `--event names the event to replay. ${USAGE}`);
  const sideEffects = values['side-effects'];
  if (sideEffects !== 'skip' && sideEffects !== 'run') {
    throw new InputError(400, 'usage', `Choose --side-effects skip (webhook steps are recorded as skipped, not sent; custom actions still run) or run (everything runs again under new keys). ${USAGE}`);
  }
  // Refused here, not by the API's body check (exit 1, in its field's words), as an empty --run is.
  if (values.workflow?.some((id) => id === '') === true) throw new InputError(400, 'usage', `--workflow is empty: give it a workflow id. ${USAGE}`);
  const eventId = values.event;
  return callAndPrint(
    'replay',
    target,
    io,
    async (client) => {
      const made = await client.replayEvent(eventId, {
        sideEffects,
        environment: target.environment,
        ...(values.workflow === undefined ? {} : { workflowIds: values.workflow }),
        ...(values.again === true ? { again: true } : {}),
        ...(values['idempotency-key'] === undefined ? {} : { idempotencyKey: values['idempotency-key'] }),
      });
      const earlier = made.idempotent_replayed === true ? ' (made earlier with this --idempotency-key: nothing new was made)' : '';
      const lines = [`replay ${made.event.id} of event ${eventId} (side_effects ${sideEffects}, ${target.environment})${earlier}`];
      // A Sluice from before the answer listed its runs sends the event alone: the replay is made all the same.
      const reactions = made.reactions ?? [];
      lines.push(made.reactions === undefined ? '  runs: see sluice explain ... --event <this replay>' : reactions.length === 0 ? '  runs: none started' : `  runs (${reactions.length}):`);
      for (const run of reactions) lines.push(`    ${runLine(run)}`);
      return printableLines(lines);
    },
    (refusal) => (refusal.code === 'replay_just_made' ? justMade(eventId, refusal) : undefined),
  );
}

/** The 409 for a replay repeated within 5 minutes, in this command's flags. */
function justMade(eventId: string, refusal: SluiceApiError): string {
  const replay = refusal.details['replay_event_id'];
  const which = typeof replay === 'string' ? ` (replay ${replay})` : '';
  return `event ${eventId} was replayed with the same --side-effects and --workflow choice in the last 5 minutes${which}. Pass --again to make it once more; give each replay an --idempotency-key to make retries of one replay safe.`;
}
