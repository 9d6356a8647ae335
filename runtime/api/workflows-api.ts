// REST: create, list, get, update (PUT or PATCH), delete and toggle workflows, read their versions
// and rotate their signing secret. Writes need developer, reads viewer; the secret is shown only on create and rotate.

import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { ConflictError, InputError, notFound } from '../errors.ts';
import { cutText } from '../validation/shown-name.ts';
import { assertNoBodyFields, parseJsonRequest } from '../http/parse-json.ts';
import { json, noContent, type HttpRequest, type Route } from '../http/types.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { expectRecord, readEnum, rejectUnknown, requirePresent } from '../workflows/input-fields.ts';
import { parseWorkflowInput } from '../workflows/parse-workflow.ts';
import type { WorkflowStore } from '../workflows/workflow-store.ts';
import type { Workflow, WorkflowDraft, WorkflowVersion } from '../workflows/workflow-types.ts';
import { redactVersion, redactWorkflow } from '../workflows/viewer-redaction.ts';
import type { ApiContext } from './context.ts';
import { assertVersionMatches, parseIfMatch, versionTag, type IfMatch } from './if-match.ts';
import { createdCursor, isCursorText } from './sorted-page.ts';
import { byteCappedPage } from './byte-capped-page.ts';
import { KeyedSerial } from '../keyed-serial.ts';
import { parseIdempotencyKey } from './idempotency-key.ts';
import { encodeCursor, ENVIRONMENT_QUERY, environmentOf, parseCursorOf, parseLimit } from './query-params.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';

/**
 * How often a PUT/PATCH that finds its version replaced is re-applied onto the newer one. Writes of
 * one workflow are serialized in this process, so this guards only against a writer outside them.
 */
const UPDATE_ATTEMPTS = 5;
const VERSION_NUMBER = /^[1-9]\d{0,14}$/;

type ToggleAction = 'enable' | 'disable';
const TOGGLE_ACTIONS: readonly ToggleAction[] = ['enable', 'disable'];

/** Refuses a draft whose custom_action steps name an action that does not exist in the org (422, naming the step). */
function assertActionsExist(draft: WorkflowDraft, orgId: string, actionExists: (orgId: string, actionId: string) => boolean): void {
  draft.steps.forEach((step, index) => {
    if (step.type === 'custom_action' && !actionExists(orgId, step.action_id)) {
      throw new InputError(422, 'unknown_custom_action', `Custom action "${step.action_id}" does not exist in this organization; upload it first.`, {
        field: `steps[${index}].action_id`,
      });
    }
  });
}

/** `actionExists` lets writes refuse custom_action steps naming unknown actions (runs would fail closed anyway). */
export function workflowRoutes(ctx: ApiContext, workflows: WorkflowStore, actionExists: (orgId: string, actionId: string) => boolean): Route[] {
  const base = '/organizations/:org_id/workflows';
  const one = `${base}/:workflow_id`;
  const orgFor = (request: HttpRequest, role: 'viewer' | 'developer'): Organization =>
    ctx.auth.requireOrg(request, request.params.org_id ?? '', role);

  const seesCredentials = (request: HttpRequest): boolean => ctx.auth.seesCredentials(request);
  const forCaller = <T extends WorkflowDraft>(request: HttpRequest, workflow: T): T => (seesCredentials(request) ? workflow : redactWorkflow(workflow));

  /**
   * The current workflow named by the path in the requested environment (`?environment=`, default
   * production): 404 for unknown, malformed, other-org or other-environment ids; 402 for sandbox on starter.
   */
  const requireWorkflow = (org: Organization, request: HttpRequest): Workflow => {
    const environment = environmentOf(request, org);
    const workflow = workflows.get(org.id, request.params.workflow_id ?? '');
    if (workflow === undefined || workflow.environment !== environment) throw notFound('Workflow', 'workflow_id');
    return workflow;
  };

  /**
   * The id of a workflow whose versions may be read in the requested environment: a current one,
   * or a deleted one whose versions stay for the runs pinned to them (README: DELETE).
   */
  const requireHistory = (org: Organization, request: HttpRequest): string => {
    const environment = environmentOf(request, org);
    const id = request.params.workflow_id ?? '';
    const current = workflows.get(org.id, id);
    const newest = current === undefined ? workflows.newestVersion(org.id, id) : undefined;
    const found = current?.environment ?? newest?.definition.environment;
    if (found !== environment) throw notFound('Workflow', 'workflow_id');
    return id;
  };

  /**
   * One write of a workflow at a time (updates and toggles, each a new version, rotations and deletes), so an
   * update never finds the version it read replaced by a concurrent request's. The key (and the
   * org's plan) is read again when the write's turn comes: one revoked meanwhile writes nothing (401).
   */
  const writes = new KeyedSerial();
  const oneAtATime = <T>(org: Organization, request: HttpRequest, write: (org: Organization) => Promise<T>): Promise<T> =>
    writes.run(`${org.id}\u0000${request.params.workflow_id ?? ''}`, () => write(orgFor(request, 'developer')));
  const update = (request: HttpRequest) => {
    const org = orgFor(request, 'developer');
    // A workflow it does not have is a 404 whatever the body says. The body is read and judged
    // (against the version there now; again in the write's turn) before the update waits its turn:
    // a handler reads its body before its first await (large-body-share.ts).
    const current = requireWorkflow(org, request);
    const expected = parseIfMatch(request.headers['if-match']);
    const body = parseJsonRequest(request);
    parseWorkflowInput(body, current);
    return oneAtATime(org, request, (now) => updateNow(now, request, body, expected));
  };
  /**
   * Applies the body onto the current version and stores it; re-applies onto a newer version if
   * another write won, unless the request named the version it was made from (if-match.ts).
   */
  const updateNow = async (org: Organization, request: HttpRequest, body: unknown, expected: IfMatch | undefined) => {
    let current = requireWorkflow(org, request);
    for (let attempt = 1; ; attempt += 1) {
      assertVersionMatches(expected, current.version);
      const draft = parseWorkflowInput(body, current);
      assertSandboxAllowed(org, draft.environment);
      assertActionsExist(draft, org.id, actionExists);
      // An update that changes nothing makes no version (the cap counts versions).
      if (isDeepStrictEqual(draft, draftOf(current))) return json(200, { workflow: current }, versionTag(current.version));
      try {
        const workflow = await workflows.update(org.id, current.id, draft, ctx.clock.now(), { ifVersion: current.version });
        return json(200, { workflow }, versionTag(workflow.version));
      } catch (error) {
        if (!(error instanceof ConflictError && error.code === 'workflow_version_conflict') || attempt >= UPDATE_ATTEMPTS) throw error;
        current = requireWorkflow(org, request);
      }
    }
  };

  return [
    {
      method: 'POST',
      pattern: base,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const idempotencyKey = parseIdempotencyKey(request.headers['idempotency-key']);
        const draft = parseWorkflowInput(parseJsonRequest(request), undefined, idempotencyKey === undefined ? {} : { newStepId: stepIdsOf(idempotencyKey) });
        assertSandboxAllowed(org, draft.environment);
        assertActionsExist(draft, org.id, actionExists);
        const { workflow, signingSecret, earlier } = await workflows.create(draft, org.id, ctx.clock.now(), idempotencyKey);
        if (!earlier) return json(201, { workflow, signing_secret: signingSecret }, versionTag(workflow.version));
        // A retry: the same definition as the one the key created (version 1, which never changes).
        if (!isDeepStrictEqual(workflows.version(org.id, workflow.id, 1)?.definition, draft)) {
          throw new ConflictError('idempotency_key_reused', `This Idempotency-Key already created workflow "${workflow.id}" from another definition.`, { workflow_id: workflow.id });
        }
        return json(201, { workflow, signing_secret: signingSecret, idempotent_replayed: true }, { 'idempotent-replayed': 'true', ...versionTag(workflow.version) });
      },
    },
    {
      method: 'GET',
      pattern: base,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = orgFor(request, 'viewer');
        const environment = environmentOf(request, org);
        const limit = parseLimit(request);
        const after = parseCursorOf(request, [isCursorText, isCursorText]);
        // The caller's key is looked up once for the page, not once per workflow on it.
        const view = seesCredentials(request) ? (workflow: Workflow): Workflow => workflow : redactWorkflow;
        // Read one at a time, newest first, and like the other lists ended early past MAX_PAGE_BYTES:
        // a workflow can be about 1 MiB, and an org may hold 2,000.
        const page = byteCappedPage(workflows.newestFirst(org.id, environment, after), limit, view, createdCursor(request));
        return json(200, { workflows: page.views, next_cursor: page.nextCursor });
      },
    },
    {
      method: 'GET',
      pattern: one,
      query: ENVIRONMENT_QUERY,
      handler: (request) => {
        const workflow = requireWorkflow(orgFor(request, 'viewer'), request);
        return json(200, { workflow: forCaller(request, workflow) }, versionTag(workflow.version));
      },
    },
    { method: 'PUT', pattern: one, query: ENVIRONMENT_QUERY, handler: update },
    { method: 'PATCH', pattern: one, query: ENVIRONMENT_QUERY, handler: update },
    {
      method: 'DELETE',
      pattern: one,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        requireWorkflow(org, request);
        // With If-Match, deleted only at that version (RFC 9110: a stale tag is 412 for a DELETE too).
        const expected = parseIfMatch(request.headers['if-match']);
        return oneAtATime(org, request, async (now) => {
          const current = requireWorkflow(now, request);
          assertVersionMatches(expected, current.version);
          await workflows.delete(now.id, current.id, ctx.clock.now());
          return noContent();
        });
      },
    },
    {
      method: 'POST',
      pattern: `${one}/toggle`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const expected = parseIfMatch(request.headers['if-match']);
        const action = parseToggle(parseJsonRequest(request));
        return oneAtATime(org, request, async (now) => {
          const current = requireWorkflow(now, request);
          assertVersionMatches(expected, current.version);
          const workflow = await workflows.setStatus(now.id, current.id, action === 'enable' ? 'enabled' : 'disabled', ctx.clock.now());
          return json(200, { workflow }, versionTag(workflow.version));
        });
      },
    },
    {
      method: 'GET',
      pattern: `${one}/versions`,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      query: [...ENVIRONMENT_QUERY, 'limit', 'cursor'],
      handler: (request) => {
        const org = orgFor(request, 'viewer');
        const workflowId = requireHistory(org, request);
        const limit = parseLimit(request);
        const before = parseVersionCursor(request);
        // A version can be over a megabyte: the page ends early past MAX_PAGE_BYTES, as every list does.
        const view = seesCredentials(request) ? (version: WorkflowVersion): WorkflowVersion => version : redactVersion;
        const page = byteCappedPage(workflows.versions(org.id, workflowId, before), limit, view, (last) => encodeCursor(request, [last.version]));
        return json(200, { versions: page.views, next_cursor: page.nextCursor });
      },
    },
    {
      method: 'GET',
      pattern: `${one}/versions/:version`,
      query: ENVIRONMENT_QUERY,
      handler: (request) => {
        const org = orgFor(request, 'viewer');
        const workflowId = requireHistory(org, request);
        const raw = request.params.version ?? '';
        const version = VERSION_NUMBER.test(raw) ? workflows.version(org.id, workflowId, Number(raw)) : undefined;
        if (version === undefined) throw notFound(`Version ${cutText(raw, 20)} of this workflow`, 'version');
        return json(200, { version: seesCredentials(request) ? version : redactVersion(version) });
      },
    },
    {
      method: 'POST',
      pattern: `${one}/signing-secret/rotate`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const idempotencyKey = parseIdempotencyKey(request.headers['idempotency-key']);
        // Before the rotation waits its turn, as the update reads its body.
        requireWorkflow(org, request);
        assertNoBodyFields(request);
        return oneAtATime(org, request, async (now) => {
          const current = requireWorkflow(now, request);
          const { signingSecret, earlier } = await workflows.rotateSigningSecret(now.id, current.id, ctx.clock.now(), idempotencyKey);
          return earlier ? json(200, { signing_secret: signingSecret, idempotent_replayed: true }, { 'idempotent-replayed': 'true' }) : json(200, { signing_secret: signingSecret });
        });
      },
    },
  ];
}

/**
 * Ids for the steps a keyed create gives none, derived from the key in step order: a retry of the
 * same request parses to the same draft, which is how it is told from another definition.
 */
function stepIdsOf(idempotencyKey: string): () => string {
  let next = 0;
  return () => `step_${createHash('sha256').update(`${idempotencyKey}\u0000${next++}`).digest('hex').slice(0, 12)}`;
}

function parseToggle(body: unknown): ToggleAction {
  const record = expectRecord(body, '');
  rejectUnknown(record, ['action'], '');
  return readEnum(requirePresent(record, 'action', ''), 'action', TOGGLE_ACTIONS);
}

/** A version number as a cursor part: the page before it ended there (exclusive). */
const isVersionNumber = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 1;

/** `?cursor=` of the versions list (of this workflow: query-params.ts ties a cursor to its list). */
const parseVersionCursor = (request: HttpRequest): number | undefined => parseCursorOf(request, [isVersionNumber])?.[0];

/** The writable part of a workflow, shaped as `parseWorkflowInput` returns it. */
function draftOf(workflow: Workflow): WorkflowDraft {
  const { name, trigger_event, environment, status, channel, steps } = workflow;
  return { name, trigger_event, environment, status, ...(channel === undefined ? {} : { channel }), steps };
}
