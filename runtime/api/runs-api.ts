// REST: list and explain runs, resume a failed run, cancel a run, and list failed events for triage.
// Reads need viewer, resume/cancel need developer; every read and write is scoped to one environment.

import { describeRun } from '../../actors/run-view.ts';
import { isFinished } from '../../actors/run-work.ts';
import { ConflictError, InputError, notFound } from '../errors.ts';
import { assertNoBodyFields } from '../http/parse-json.ts';
import { json, rawJson, type HttpRequest, type Route } from '../http/types.ts';
import { eventWithRawPayload, weighEvent } from '../events/payload-text.ts';
import { MAX_PAGE_BYTES } from '../ledger/page-by-time.ts';
import type { RunEngine } from '../runs/run-engine.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { ApiContext } from './context.ts';
import { summarizeRun } from '../runs/run-summary.ts';
import { encodeCursor, ENVIRONMENT_QUERY, environmentOf, parseCursor, parseLimit } from './query-params.ts';
import { isWorkflowId } from '../workflows/workflow-store.ts';
import { redactRunView } from '../workflows/viewer-redaction.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';

const STATES = new Set(['queued', 'running', 'backoff', 'delaying', 'failed', 'completed', 'cancelled']);

/** `pinned` answers a run's workflow version (for what a viewer may not read of it: viewer-redaction.ts). */
export function runRoutes(ctx: ApiContext, runs: RunStore, engine: RunEngine, pinned: (orgId: string, workflowId: string, version: number) => WorkflowVersion | undefined): Route[] {
  const base = '/organizations/:org_id/runs';
  /** The run named by the path in the requested environment (`?environment=`, default production), else 404. */
  const requireRun = (request: HttpRequest, role: 'viewer' | 'developer') => {
    const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', role);
    const environment = environmentOf(request, org);
    const run = runs.get(org.id, request.params.run_id ?? '');
    if (run === undefined || run.context.environment !== environment) throw notFound('Run', 'run_id');
    return { org, run };
  };
  /** The run as stored after a command on it; 404 if a sandbox reset removed it meanwhile (never the state read before). */
  const readAgain = (orgId: string, runId: string) => {
    const now = runs.get(orgId, runId);
    if (now === undefined) throw notFound('Run', 'run_id');
    return now;
  };
  return [
    {
      method: 'GET',
      pattern: base,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const state = request.query.get('state') ?? undefined;
        if (state !== undefined && !STATES.has(state)) throw new InputError(400, 'invalid_state', `state must be one of ${[...STATES].join(', ')}.`, { field: 'state' });
        const workflowId = request.query.get('workflow_id') ?? undefined;
        if (workflowId !== undefined && !isWorkflowId(workflowId)) throw new InputError(400, 'invalid_workflow_id', 'workflow_id must be a workflow id.', { field: 'workflow_id' });
        const cursor = parseCursor(request);
        const page = runs.list(org.id, environmentOf(request, org), {
          limit: parseLimit(request),
          ...(state === undefined ? {} : { state }),
          ...(workflowId === undefined ? {} : { workflowId }),
          ...(cursor === undefined ? {} : { cursor }),
        }, summarizeRun);
        return json(200, {
          runs: page.runs,
          next_cursor: page.nextCursor === null ? null : encodeCursor(request, page.nextCursor),
        });
      },
    },
    {
      method: 'GET',
      pattern: `${base}/:run_id`,
      query: ENVIRONMENT_QUERY,
      handler: (request) => {
        const { run } = requireRun(request, 'viewer');
        const view = describeRun(run);
        if (ctx.auth.seesCredentials(request)) return json(200, { run: view });
        return json(200, { run: redactRunView(view, pinned(run.context.orgId, run.context.workflowId, run.context.workflowVersion)?.definition) });
      },
    },
    {
      method: 'POST',
      pattern: `${base}/:run_id/resume`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const { org, run } = requireRun(request, 'developer');
        assertNoBodyFields(request);
        if (run.value !== 'failed') throw new ConflictError('run_not_failed', `Only a failed run can be resumed; this one is ${run.value}.`);
        const resumed = await engine.command(org.id, run.context.runId, { type: 'run.resume' });
        const now = readAgain(org.id, run.context.runId);
        // Another resume or a cancel got there first.
        if (!resumed) throw new ConflictError('run_not_failed', `Only a failed run can be resumed; this one is ${now.value}.`);
        return json(202, { run: describeRun(now) });
      },
    },
    {
      method: 'POST',
      pattern: `${base}/:run_id/cancel`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const { org, run } = requireRun(request, 'developer');
        assertNoBodyFields(request);
        if (isFinished(run)) throw new ConflictError('run_finished', `The run is already ${run.value}.`);
        const cancelled = await engine.command(org.id, run.context.runId, { type: 'run.cancel', reason: 'cancelled through the API' });
        const now = readAgain(org.id, run.context.runId);
        // It finished (or another cancel landed) between the check and the command.
        if (!cancelled) throw new ConflictError('run_finished', `The run is already ${now.value}.`);
        return json(200, { run: describeRun(now) });
      },
    },
    {
      method: 'GET',
      pattern: '/organizations/:org_id/failed-events',
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const page = runs.failedEvents(org.id, environmentOf(request, org), parseLimit(request), parseCursor(request), summarizeRun);
        const rows = [];
        let bytes = 0;
        for (const { eventId, runs: shown, failedRuns } of page.events) {
          // As the event list: past MAX_PAGE_BYTES of payloads the page ends, with a cursor after its last event.
          if (bytes >= MAX_PAGE_BYTES) break;
          const event = ctx.events.get(org.id, eventId);
          bytes += event === undefined ? 0 : weighEvent(event);
          rows.push({ event: event === undefined ? { id: eventId } : eventWithRawPayload(event), runs: shown, failed_runs: failedRuns });
        }
        const last = page.events[rows.length - 1];
        const nextCursor = rows.length < page.events.length && last !== undefined ? [last.receivedAtMs, last.eventId] : page.nextCursor;
        return rawJson(200, { failed_events: rows, next_cursor: nextCursor === null ? null : encodeCursor(request, nextCursor) });
      },
    },
  ];
}
