// The caps a workflow store enforces, and their defaults: how many workflows and versions an org
// may keep, what one trigger's enabled workflows may hold, and how much stays decoded in memory.

/** Keeps `list` (read whole, then paged by the API) and `matching` bounded. */
export const MAX_WORKFLOWS_PER_ORG = 2000;
/**
 * Versions one workflow may have: every version stays readable (runs pin theirs), so the history
 * needs a bound. A workflow that reaches it is replaced by a new one (its runs keep their versions).
 */
export const MAX_VERSIONS_PER_WORKFLOW = 1000;
/**
 * Pinned versions kept decoded in memory; they never change once written, so only size bounds
 * this: by count, and by their JSON size (a version can be about 1 MiB: 400 of them once took the
 * heap past 1 GB for one org, and a few orgs could have taken the process out of memory).
 */
export const PINNED_CACHE = { max: 4096, maxBytes: 64 * 1024 * 1024 };
/**
 * The JSON size the enabled workflows of one (org, environment, trigger event) may have together:
 * every such event reads them all (one run each). A quarter of the pinned cache, so one trigger's
 * versions stay decoded between its events; without it, 100 workflows of ~900 KB on one event
 * type pushed each other out and every event decoded ~100 MB again (0.4-0.9 s of the event loop).
 */
export const MAX_TRIGGER_BYTES = 16 * 1024 * 1024;
/**
 * The enabled workflows one (org, environment, trigger event) may have: each event of that type
 * starts one run per workflow, all made in the event's own write, and the ingest quota counts
 * events. 2,000 small workflows on one type made 2,000 runs per event, 180,000 runs from 90
 * events within a starter plan's quota, and held the event loop for 12 s at a stretch.
 */
export const MAX_WORKFLOWS_PER_TRIGGER = 100;
/**
 * The bytes of workflow versions one org may keep (every version of every workflow, and of deleted
 * ones until they are pruned: version-bytes.ts). Ordinary workflows are a few KB: this holds tens
 * of thousands of versions. A version that disables an enabled workflow always goes through.
 */
export const MAX_VERSION_BYTES_PER_ORG = 256 * 1024 * 1024;

/** One store's own values for the caps above (tests set small ones); each left out takes its default. */
export interface WorkflowStoreLimits {
  readonly pinnedCache: { readonly max: number; readonly maxBytes: number };
  readonly triggerBytes: number;
  readonly triggerWorkflows: number;
  readonly orgVersionBytes: number;
}
