// Finds, at boot, the event schemas stored before a rule that now refuses them (an unbounded
// `uniqueItems`, a `$id`): ingest answers their events `422 invalid_event_schema` until the source
// or device is updated, and the operator should hear of it before the senders do.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from '../log.ts';
import { storedSchemaProblem, type SchemaDeclarer } from './event-schemas.ts';

export interface StaleSchema {
  readonly org_id: string;
  /** The source's name, or a device's event source (`@device:<name>`). */
  readonly source: string;
  readonly event_type: string;
  readonly problem: string;
}

export function* staleSchemas(declarers: Iterable<SchemaDeclarer>): Generator<StaleSchema> {
  for (const declarer of declarers) {
    // Sources stored before schemas existed have no event_types.
    for (const [type, schema] of Object.entries(declarer.event_types ?? {})) {
      const problem = storedSchemaProblem(schema);
      if (problem !== undefined) yield { org_id: declarer.org_id, source: declarer.name, event_type: type, problem };
    }
  }
}

/**
 * One warning per stale schema, reading one declarer per event-loop turn (each may hold ~1 MB of
 * schemas, ~30 ms to decode: a start with 1,000 such devices held every request for 20 s), until
 * `stop` is aborted; then logs that the check is done. Resolves with how many there were.
 */
export async function warnOfStaleSchemas(declarers: Iterable<SchemaDeclarer>, logger: Logger, stop: AbortSignal): Promise<number> {
  let count = 0;
  for (const declarer of declarers) {
    for (const stale of staleSchemas([declarer])) {
      count += 1;
      logger.warn('stored event schema refused at ingest: its events get 422 invalid_event_schema until the source or device is updated', { ...stale });
    }
    await nextTurn();
    if (stop.aborted) return count;
  }
  logger.info('stored event schemas checked', { refused: count });
  return count;
}

/** Runs warnOfStaleSchemas in the background (a failure is logged); answers how to stop it, resolving once it has. */
export function startStaleSchemaCheck(declarers: Iterable<SchemaDeclarer>, logger: Logger): () => Promise<void> {
  const stop = new AbortController();
  const checking = warnOfStaleSchemas(declarers, logger, stop.signal).catch((error: unknown) => logger.error('stored event schemas could not be checked', { error: String(error) }));
  return async () => {
    stop.abort();
    await checking;
  };
}
