// REST: the two event replays. Business replay makes a new event after an explicit side_effects
// choice; transport replay only explains what ingest would do with the recorded request.

import { InputError } from '../errors.ts';
import { parseJsonRequest } from '../http/parse-json.ts';
import { json, type Route } from '../http/types.ts';
import type { Inbox } from '../inbox/inbox.ts';
import { replayOf } from '../replay/business-replay.ts';
import { explainTransportReplay } from '../replay/transport-replay.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import type { WorkflowStore } from '../workflows/workflow-store.ts';
import type { ApiContext } from './context.ts';
import { environmentOf } from './query-params.ts';

const parseReplay = createBodyParser<{ side_effects: 'skip' | 'run' }>({
  type: 'object',
  additionalProperties: false,
  required: ['side_effects'],
  properties: { side_effects: { type: 'string', enum: ['skip', 'run'] } },
});

export function replayRoutes(ctx: ApiContext, inbox: Inbox, workflows: WorkflowStore): Route[] {
  const base = '/organizations/:org_id/events/:event_id';
  return [
    {
      method: 'POST',
      pattern: `${base}/replay`,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const original = ctx.events.require(org.id, request.params.event_id ?? '', environmentOf(request, org));
        let choice: { side_effects: 'skip' | 'run' };
        try {
          choice = parseReplay(parseJsonRequest(request));
        } catch (error) {
          if (error instanceof InputError && error.status === 400 && error.code !== 'malformed_json') {
            throw new InputError(400, 'side_effects_required', 'Choose side_effects: "skip" (webhooks are recorded, not sent) or "run" (everything runs again under new keys).', { field: 'side_effects' });
          }
          throw error;
        }
        const replay = replayOf(original, choice.side_effects, ctx.clock.now());
        await ctx.events.store({ event: replay, recording: null, claim: null });
        return json(202, { event: replay });
      },
    },
    {
      method: 'POST',
      pattern: `${base}/transport-replay`,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const event = ctx.events.require(org.id, request.params.event_id ?? '', environmentOf(request, org));
        const report = explainTransportReplay(event, ctx.events.recording(org.id, event.id), {
          source: ctx.sources.get(org.id, event.source),
          inbox,
          matching: (type) => workflows.matching(org.id, event.environment, type),
          nowMs: ctx.clock.now(),
        });
        return json(200, { report });
      },
    },
  ];
}
