// `sluice explain`: what happened to an event or a run, in words, for support (explain-text.ts):
// where the event came from, the runs it started and its replays; a run's steps and attempts with
// what went out, what came back and under which idempotency key. Read-only: a viewer key will do.

import { parseCommandArgs } from './cli-parse-args.ts';
import { API_TARGET_OPTIONS, apiTargetOf, type ClientCommandIo } from './cli-api-target.ts';
import { callAndPrint } from './cli-client-call.ts';
import { InputError } from './errors.ts';
import { explainEvent, explainRun } from './explain-text.ts';

const USAGE = 'usage: sluice explain <http://host:port> --org <org id> (--event <event id> | --run <run id>) [--key <API key>, or SLUICE_API_KEY] [--environment production|sandbox]';

/** Prints the explanation (exit 0), or why Sluice could not give it (exit 1). */
export async function explainCommand(args: readonly string[], io: ClientCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args: [...args], strict: true, allowPositionals: true, options: { ...API_TARGET_OPTIONS, event: { type: 'string' }, run: { type: 'string' } } });
  const target = apiTargetOf(values, positionals, io.env ?? {}, USAGE);
  if ((values.event === undefined) === (values.run === undefined)) throw new InputError(400, 'usage', `Name one event (--event) or one run (--run). ${USAGE}`);
  return callAndPrint('explain', target, io, async (client) =>
    values.event !== undefined ? explainEvent(await client.getEvent(values.event, target.environment)) : explainRun((await client.getRun(values.run!, target.environment)).run),
  );
}
