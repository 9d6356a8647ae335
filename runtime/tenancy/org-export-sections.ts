// What an organization's export holds, in order: a header, the org, then each kind of record the API
// shows, every environment, each line the view an admin's GET of it answers (credentials
// included as an admin sees them; secret values, key hashes and device token hashes never, as in
// every answer). Left out: what the rest is derived from or what only serves the runtime (indexes,
// live updates, dedup claims, counters). Sources, devices and workflow versions are read past the
// caches that hold them decoded, so an export does not push out what ingest and runs keep warm.

import { describeRun } from '../../actors/run-view.ts';
import type { CustomActionStore } from '../actions/custom-action-store.ts';
import type { SecretNames } from '../actions/secret-names.ts';
import { eventWithRawPayload } from '../events/payload-text.ts';
import type { EventStore } from '../events/event-store.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import type { RunStore } from '../runs/run-store.ts';
import { describeSource } from '../sources/source-record.ts';
import type { SourceStore } from '../sources/source-store.ts';
import { describeDevice } from '../triggers/device-record.ts';
import type { DeviceStore } from '../triggers/device-store.ts';
import { describeSchedule } from '../triggers/schedule-record.ts';
import type { ScheduleStore } from '../triggers/schedule-store.ts';
import type { WorkflowStore } from '../workflows/workflow-store.ts';
import { describeApiKey, type ApiKeyStore } from './api-keys.ts';
import type { ExportSection, KeyPart } from './org-export.ts';
import type { OrganizationStore } from './organizations.ts';

/** The version of the export's format, in its header line: a reader checks it before reading on. */
export const EXPORT_FORMAT = 1;

export interface ExportedStores {
  readonly orgs: OrganizationStore;
  readonly apiKeys: ApiKeyStore;
  readonly sources: SourceStore;
  readonly schedules: ScheduleStore;
  /** When the ticker will fire a schedule next, if armed (schedule-ticker.ts). */
  readonly scheduleDueAt: (orgId: string, name: string) => number | undefined;
  readonly devices: DeviceStore;
  readonly workflows: WorkflowStore;
  readonly actions: CustomActionStore;
  readonly secretNames: SecretNames;
  readonly events: EventStore;
  readonly runs: RunStore;
  readonly projections: ProjectionStore;
  readonly now: () => number;
}

const text = (part: KeyPart | undefined): string => (typeof part === 'string' ? part : '');
/** `view` of `record` under `name`, or undefined when there is none. */
const shown = <T>(name: string, record: T | undefined, view: (record: T) => unknown = (same) => same): Record<string, unknown> | undefined =>
  record === undefined ? undefined : { [name]: view(record) };

export function exportSections(s: ExportedStores): ExportSection[] {
  return [
    { kind: 'export', item: (orgId) => ({ format: EXPORT_FORMAT, organization_id: orgId, exported_at: new Date(s.now()).toISOString() }) },
    { kind: 'organization', item: (orgId) => shown('organization', s.orgs.get(orgId)) },
    { kind: 'api_key', table: 'api-keys-by-org', item: (orgId, [id]) => shown('api_key', s.apiKeys.get(orgId, text(id)), describeApiKey) },
    { kind: 'source', table: 'sources', item: (orgId, [name]) => shown('source', s.sources.uncached(orgId, text(name)), describeSource) },
    {
      kind: 'schedule',
      table: 'schedules',
      item: (orgId, [name]) => shown('schedule', s.schedules.get(orgId, text(name)), (schedule) => describeSchedule(schedule, s.now(), s.scheduleDueAt(orgId, schedule.name))),
    },
    { kind: 'device', table: 'devices', item: (orgId, [name]) => shown('device', s.devices.uncached(orgId, text(name)), describeDevice) },
    { kind: 'workflow', table: 'workflows', item: (orgId, [id]) => shown('workflow', s.workflows.get(orgId, text(id))) },
    // Every version, of deleted workflows too: the runs that pinned them name them.
    {
      kind: 'workflow_version',
      table: 'workflow-versions',
      item: (orgId, [id, version]) => (typeof version === 'number' ? shown('version', s.workflows.uncachedVersion(orgId, text(id), version)) : undefined),
    },
    {
      kind: 'custom_action',
      table: 'custom-actions',
      item: (orgId, [id]) => {
        const action = s.actions.describe(orgId, text(id));
        return action === undefined ? undefined : { custom_action: action, secret_keys: s.secretNames.of(orgId, action.id) };
      },
    },
    // The uploaded WebAssembly, by digest (its versions name it), as base64.
    {
      kind: 'custom_action_module',
      table: 'custom-action-modules',
      item: (orgId, [digest]) => shown('module', s.actions.moduleBytes(orgId, text(digest)), (bytes) => ({ digest, bytes: bytes.byteLength, base64: Buffer.from(bytes).toString('base64') })),
    },
    {
      kind: 'event',
      table: 'events',
      item: (orgId, [id]) => {
        const event = s.events.get(orgId, text(id));
        return event === undefined ? undefined : { event: eventWithRawPayload(event), recording: s.events.recording(orgId, event.id) ?? null };
      },
    },
    { kind: 'run', table: 'runs', item: (orgId, [id]) => shown('run', s.runs.get(orgId, text(id)), describeRun) },
    {
      kind: 'projection_row',
      table: 'projections',
      item: (orgId, [environment, name, type, id]) => shown('row', s.projections.get(orgId, text(environment), text(name), text(type), text(id))),
    },
  ];
}
