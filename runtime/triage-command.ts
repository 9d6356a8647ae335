// `sluice failed`, `sluice resume` and `sluice cancel`: support's triage from the command line. The
// first lists the events whose runs failed, newest first, with each failed run's reason; the other
// two act on one run (POST .../resume, .../cancel) and print it as `sluice explain` would.

import { parseCommandArgs } from './cli-parse-args.ts';
import { API_TARGET_OPTIONS, apiTargetOf, type ClientCommandIo } from './cli-api-target.ts';
import { callAndPrint } from './cli-client-call.ts';
import { wholeNumberOfDigits } from './decimal-digits.ts';
import { InputError } from './errors.ts';
import { explainFailedEvents, explainRun } from './explain-text.ts';

const FAILED_USAGE = 'usage: sluice failed <http://host:port> --org <org id> [--limit <n>, default 20] [--key <API key>, or SLUICE_API_KEY] [--environment production|sandbox]';
const RUN_USAGE = (verb: string): string => `usage: sluice ${verb} <http://host:port> --org <org id> --run <run id> [--key <API key>, or SLUICE_API_KEY] [--environment production|sandbox]`;

/** The newest `--limit` events with failed runs (exit 0), or why Sluice did not list them (exit 1). */
export async function failedCommand(args: readonly string[], io: ClientCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args: [...args], strict: true, allowPositionals: true, options: { ...API_TARGET_OPTIONS, limit: { type: 'string' } } });
  const target = apiTargetOf(values, positionals, io.env ?? {}, FAILED_USAGE);
  const limit = values.limit === undefined ? 20 : wholeNumberOfDigits(values.limit);
  if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= 500)) throw new InputError(400, 'usage', `--limit is a whole number from 1 to 500. ${FAILED_USAGE}`);
  return callAndPrint('failed', target, io, async (client) => {
    const failed = [];
    for await (const entry of client.failedEvents({ environment: target.environment, pageSize: limit })) {
      failed.push(entry);
      if (failed.length === limit) break;
    }
    return explainFailedEvents(failed, limit, target.environment);
  });
}

/** Resumes or cancels one run and prints it (exit 0), or prints why Sluice refused (exit 1). */
export async function runActionCommand(verb: 'resume' | 'cancel', args: readonly string[], io: ClientCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args: [...args], strict: true, allowPositionals: true, options: { ...API_TARGET_OPTIONS, run: { type: 'string' } } });
  const target = apiTargetOf(values, positionals, io.env ?? {}, RUN_USAGE(verb));
  if (values.run === undefined) throw new InputError(400, 'usage', `--run names the run to ${verb}. ${RUN_USAGE(verb)}`);
  const runId = values.run;
  return callAndPrint(verb, target, io, async (client) => {
    const { run } = verb === 'resume' ? await client.resumeRun(runId, target.environment) : await client.cancelRun(runId, target.environment);
    return `${verb === 'resume' ? 'resumed' : 'cancelled'}: ${explainRun(run)}`;
  });
}
