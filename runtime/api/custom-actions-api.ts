// REST: upload custom actions and new versions (multipart), edit, review, simulate, and manage their
// secrets through the hook-runner vault. Writes need developer, reviews admin, reads viewer.

import { shownName } from '../validation/shown-name.ts';
import { parseActionName, parseDescription, parseLongText, MAX_REASON_LENGTH } from '../actions/action-fields.ts';
import { describeCustomAction, moduleDigest, type ActionVersionRecord, type CustomActionRecord, type ReviewDecision } from '../actions/custom-action-record.ts';
import type { CompiledUpload, CustomActionStore } from '../actions/custom-action-store.ts';
import { parseActionUpload, UPLOAD_BODY_LIMIT } from '../actions/multipart-upload.ts';
import { parsePermissionList, SECRET_KEY_PATTERN } from '../actions/permissions.ts';
import { simulateAction } from '../actions/simulate-action.ts';
import { unconfirmedSecretWrite } from '../actions/unconfirmed-secret-write.ts';
import { SimulationSlots } from '../actions/simulation-slots.ts';
import { InputError, notFound, RetryableError, SluiceError } from '../errors.ts';
import type { ActionInvoker, HookRunnerClient } from '../hook-runner/client.ts';
import { parseJsonRequest, parseJsonRequestText } from '../http/parse-json.ts';
import { memberText } from '../validation/json-member-text.ts';
import { json, noContent, rawJson, type HttpRequest, type RequestHead, type Route } from '../http/types.ts';
import type { Role } from '../tenancy/api-keys.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import type { ApiContext } from './context.ts';
import { parseIfMatch, recordMismatch, recordTag } from './if-match.ts';
import { sortedPage } from './sorted-page.ts';
import type { SecretNames } from '../actions/secret-names.ts';
import type { SecretWrites } from '../actions/secret-writes.ts';

const MAX_SECRET_VALUE_BYTES = 64 * 1024;
/** Generous bound for the schema; the permission parser enforces the real limit after removing duplicates. */
const MAX_LISTED_PERMISSIONS = 1000;

interface PatchBody { name?: unknown; description?: unknown; permissions?: unknown[] }
interface ReviewBody { status: ReviewDecision; reason?: unknown; version?: number }
interface SecretBody { key: string; value: string }
interface SimulateBody { payload: unknown; version?: number }

const parsePatch = createBodyParser<PatchBody>({
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { name: {}, description: {}, permissions: { type: 'array', maxItems: MAX_LISTED_PERMISSIONS } },
});
const parseReview = createBodyParser<ReviewBody>({
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: { type: 'string', enum: ['approved', 'rejected', 'revoked'] }, reason: {}, version: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } },
});
const parseSecret = createBodyParser<SecretBody>({
  type: 'object',
  additionalProperties: false,
  required: ['key', 'value'],
  properties: { key: { type: 'string' }, value: { type: 'string' } },
});
const parseSimulate = createBodyParser<SimulateBody>({
  type: 'object',
  additionalProperties: false,
  required: ['payload'],
  properties: { payload: {}, version: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } },
});

function parseSecretKey(value: string, field: string): string {
  if (!SECRET_KEY_PATTERN.test(value)) throw new InputError(400, 'invalid_secret_key', `Field "${field}" must match [A-Z0-9_]{1,64}.`, { field });
  return value;
}

/** Sizes only in the messages: the value is a secret. */
function parseSecretValue(value: string): string {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes === 0) throw new InputError(400, 'invalid_request', 'Field "value" must not be empty.', { field: 'value' });
  if (bytes > MAX_SECRET_VALUE_BYTES) {
    throw new InputError(400, 'secret_too_large', `Field "value" is ${bytes} bytes; the limit is ${MAX_SECRET_VALUE_BYTES}.`, { field: 'value' });
  }
  return value;
}

/**
 * Routes under `/organizations/:org_id/custom-actions`. `runner` is the hook-runner client, or
 * undefined when the runtime runs without one: then uploads, secrets and simulate answer 503.
 * `invoker` runs simulations (default: `runner`); the runtime's restores a module the runner lost.
 * `secretWrites` orders the writes of each secret (secret-writes.ts); an org's deletion waits on it.
 */
export function customActionRoutes(ctx: ApiContext, actions: CustomActionStore, secretNames: SecretNames, secretWrites: SecretWrites, runner: HookRunnerClient | undefined, invoker: ActionInvoker | undefined = runner): Route[] {
  const base = '/organizations/:org_id/custom-actions';
  const one = `${base}/:action_id`;
  const orgFor = (request: RequestHead, role: Role): Organization => ctx.auth.requireOrg(request, request.params.org_id ?? '', role);

  const requireAction = (org: Organization, request: HttpRequest): CustomActionRecord => {
    const action = actions.get(org.id, request.params.action_id ?? '');
    if (action === undefined) throw notFound('Custom action', 'action_id');
    return action;
  };

  const simulations = new SimulationSlots();

  const requireRunner = (): HookRunnerClient => {
    if (runner !== undefined) return runner;
    throw new RetryableError(
      'hook_runner_unavailable',
      'No hook-runner is configured, so custom actions cannot be compiled, run or given secrets; start Sluice with `sluice dev` or with --runner child|<address>.',
    );
  };

  /** An uploaded module's bytes with their digest (hashed once: 8 MiB takes ~20 ms) and size. */
  const uploaded = (bytes: Uint8Array): CompiledUpload => ({ digest: moduleDigest(bytes), size: bytes.byteLength, bytes });

  /**
   * Has the runner validate, compile and durably store the module; resolves with it once the runner
   * reported its digest (the store keeps the bytes too). A refusal keeps the runner's code and
   * reason (it names the problem) but points at the form's `file` field.
   */
  const compile = async (orgId: string, module: CompiledUpload): Promise<CompiledUpload> => {
    const client = requireRunner();
    // Below the disk floor the action could not be stored: the runner is not asked to keep its module.
    ctx.disk.assertWritable();
    let digest: string;
    try {
      digest = await client.compile(module.bytes, orgId);
    } catch (error) {
      if (error instanceof InputError) throw new InputError(error.status, error.code, error.message, { field: 'file', cause: error });
      throw error;
    }
    if (digest !== module.digest) {
      throw new SluiceError(502, 'hook_runner_digest_mismatch', 'The hook-runner reported a digest that does not match the uploaded module.');
    }
    return module;
  };

  const reviewerOf = (request: HttpRequest): string => {
    const principal = ctx.auth.authenticate(request);
    return principal.kind === 'api_key' ? principal.keyId : 'platform_admin';
  };

  const pickVersion = (org: Organization, action: CustomActionRecord, requested: number | undefined): ActionVersionRecord => {
    const version = requested === undefined ? actions.versions(org.id, action.id).at(-1) : actions.version(org.id, action.id, requested);
    if (version === undefined) throw notFound(`Version ${requested ?? 'latest'} of this custom action`, 'version');
    return version;
  };

  return [
    {
      method: 'POST',
      pattern: base,
      bodyLimit: () => UPLOAD_BODY_LIMIT,
      beforeBody: (head) => void orgFor(head, 'developer'),
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const upload = parseActionUpload(request, { requireName: true });
        const module = uploaded(upload.module);
        actions.assertRoom(org.id, module);
        await compile(org.id, module);
        // The key may have been revoked while the module compiled.
        orgFor(request, 'developer');
        const action = await actions.create(org.id, {
          name: upload.name ?? '',
          description: upload.description ?? '',
          module,
          permissions: upload.permissions ?? [],
        }, ctx.clock.now());
        return json(201, { custom_action: action }, recordTag(action));
      },
    },
    {
      method: 'GET',
      pattern: base,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = orgFor(request, 'viewer');
        // Versions are read for the page only; an action's can weigh megabytes, so the page also ends by bytes.
        const page = sortedPage(request, actions.list(org.id), (action) => describeCustomAction(action, actions.versions(org.id, action.id)));
        return json(200, { custom_actions: page.views, next_cursor: page.nextCursor });
      },
    },
    {
      method: 'GET',
      pattern: one,
      query: [],
      handler: (request) => {
        const org = orgFor(request, 'viewer');
        const action = actions.describe(org.id, requireAction(org, request).id);
        if (action === undefined) throw notFound('Custom action', 'action_id');
        return json(200, { custom_action: action }, recordTag(action));
      },
    },
    {
      method: 'PATCH',
      pattern: one,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const action = requireAction(org, request);
        const expected = parseIfMatch(request.headers['if-match']);
        const body = parsePatch(parseJsonRequest(request));
        const change = await actions.update(org.id, action.id, {
          ...(body.name === undefined ? {} : { name: parseActionName(body.name, 'name', action.name) }),
          ...(body.description === undefined ? {} : { description: parseDescription(body.description) }),
          ...(body.permissions === undefined ? {} : { permissions: parsePermissionList(body.permissions) }),
          refusal: (stored) => recordMismatch(expected, stored, 'custom action'),
        }, ctx.clock.now());
        return json(200, { custom_action: change.action, new_version: change.version }, recordTag(change.action));
      },
    },
    {
      method: 'POST',
      pattern: `${one}/versions`,
      bodyLimit: () => UPLOAD_BODY_LIMIT,
      beforeBody: (head) => void orgFor(head, 'developer'),
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const action = requireAction(org, request);
        const upload = parseActionUpload(request, { requireName: false });
        const module = uploaded(upload.module);
        actions.assertRoom(org.id, module, action.id);
        await compile(org.id, module);
        // The key may have been revoked while the module compiled.
        orgFor(request, 'developer');
        const change = await actions.addVersion(org.id, action.id, {
          module,
          ...(upload.permissions === undefined ? {} : { permissions: upload.permissions }),
          ...(upload.name === undefined ? {} : { name: upload.name }),
          ...(upload.description === undefined ? {} : { description: upload.description }),
        }, ctx.clock.now());
        return json(201, { custom_action: change.action, new_version: change.version }, recordTag(change.action));
      },
    },
    {
      method: 'POST',
      pattern: `${one}/review`,
      handler: async (request) => {
        const org = orgFor(request, 'admin');
        const action = requireAction(org, request);
        const body = parseReview(parseJsonRequest(request));
        // An approval names what the reviewer looked at: a version uploaded (or a permission added)
        // after they looked must not be approved in its place. A revocation names the version it
        // takes out of use. A rejection may default to the newest pending one.
        if (body.status !== 'rejected' && body.version === undefined) {
          throw new InputError(400, 'version_required', `Name the version: {"status":"${body.status}","version":N} (GET the custom action to see its versions).`, { field: 'version' });
        }
        const reason = body.reason === undefined || body.reason === null ? null : parseLongText(body.reason, 'reason', MAX_REASON_LENGTH);
        const change = await actions.review(org.id, action.id, {
          decision: body.status,
          reason,
          reviewer: reviewerOf(request),
          ...(body.version === undefined ? {} : { version: body.version }),
        }, ctx.clock.now());
        return json(200, { custom_action: change.action, reviewed_version: change.version }, recordTag(change.action));
      },
    },
    {
      method: 'POST',
      pattern: `${one}/secrets`,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const action = requireAction(org, request);
        const body = parseSecret(parseJsonRequest(request));
        const key = parseSecretKey(body.key, 'key');
        const value = parseSecretValue(body.value);
        // Below the disk floor its name could not be stored: the runner is not asked to keep it.
        ctx.disk.assertWritable();
        await secretWrites.run(org.id, action.id, key, async () => {
          // The key may have been revoked while this write waited its turn.
          orgFor(request, 'developer');
          await requireRunner().putSecret({ orgId: org.id, actionId: action.id, key, value }).catch((error: unknown) => {
            throw unconfirmedSecretWrite(error);
          });
          // Its name, so a runner that loses it refuses the calls that read it (required-secrets.ts).
          await secretNames.set(org.id, action.id, key);
        });
        return noContent();
      },
    },
    {
      method: 'GET',
      pattern: `${one}/secrets`,
      query: [],
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const action = requireAction(org, request);
        const keys = await requireRunner().listSecretKeys({ orgId: org.id, actionId: action.id });
        return json(200, { keys: [...keys].sort() });
      },
    },
    {
      method: 'DELETE',
      pattern: `${one}/secrets/:key`,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const action = requireAction(org, request);
        const key = request.params.key ?? '';
        // A name no secret can have names none held: 404, as any path naming nothing.
        if (!SECRET_KEY_PATTERN.test(key)) throw notFound(`Secret "${shownName(key)}" of this custom action`, 'key');
        try {
          ctx.disk.assertWritable();
        } catch (error) {
          // Below the floor a secret neither side holds is still a 404 (both reads): nothing to refuse.
          if (!secretNames.named(org.id, action.id).includes(key) && !(await requireRunner().listSecretKeys({ orgId: org.id, actionId: action.id })).includes(key)) {
            throw notFound(`Secret "${key}" of this custom action`, 'key');
          }
          throw error;
        }
        const { deleted, named } = await secretWrites.run(org.id, action.id, key, async () => {
          // The key may have been revoked while this write waited its turn.
          orgFor(request, 'developer');
          const wasNamed = secretNames.named(org.id, action.id).includes(key);
          const wasSet = secretNames.of(org.id, action.id).includes(key);
          // First: should this stop before the name goes, the calls do not require what was deleted.
          if (wasNamed) await secretNames.markDeleting(org.id, action.id, key);
          let gone: boolean;
          try {
            gone = await requireRunner().deleteSecret({ orgId: org.id, actionId: action.id, key });
          } catch (error) {
            // The runner kept the value, or may have: the calls require it again, as before (the
            // caller sends the DELETE again). Left marked, they would run on without a word should
            // the runner lose it.
            if (wasSet) await secretNames.set(org.id, action.id, key).catch(() => undefined);
            throw unconfirmedSecretWrite(error);
          }
          await secretNames.delete(org.id, action.id, key);
          return { deleted: gone, named: wasNamed };
        });
        // A runner without it, while Sluice named it, may have deleted it on an attempt of this call
        // whose answer was lost (the client sends again): the secret is gone either way.
        if (!deleted && !named) throw notFound(`Secret "${key}" of this custom action`, 'key');
        return noContent();
      },
    },
    {
      method: 'POST',
      pattern: `${one}/simulate`,
      handler: async (request) => {
        const org = orgFor(request, 'developer');
        const action = requireAction(org, request);
        const parsed = parseJsonRequestText(request);
        const body = parseSimulate(parsed.value);
        const version = pickVersion(org, action, body.version);
        const runner = invoker ?? requireRunner();
        const simulation = await simulations.run(org.id, () => simulateAction(runner, {
          orgId: org.id,
          actionId: action.id,
          digest: version.digest,
          permissions: version.permissions,
          // The payload exactly as sent (long integers, 1e400), as a run hands on an event's payload.
          payloadJson: memberText(parsed.text, 'payload') ?? JSON.stringify(body.payload ?? null),
        }));
        return rawJson(200, { version: version.version, ...simulation });
      },
    },
  ];
}
