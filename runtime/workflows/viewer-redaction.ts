// What a viewer key sees of a workflow and of its runs. Webhook steps carry their receivers'
// credentials in header values, URL query strings and URL paths (Slack's and Discord's webhook URLs
// hold their token in the path), and secrets never appear in API answers to a role that cannot
// change them (DESIGN §8): for a viewer those values read as "[redacted]", in the workflow and in
// the URL a run's webhook attempts record as evidence; names and plain path words stay, so the
// workflow and the run are still explained.

import type { JsonValue } from '../../actors/json.ts';
import { maskOccurrences } from '../../hook-runner/mask-text.ts';
import type { RunView } from '../../actors/run-view.ts';
import type { WorkflowDraft, WorkflowStep, WorkflowVersion } from './workflow-types.ts';
import { EVIDENCE_BODY_CAP } from '../runs/webhook-step.ts';

export const REDACTED = '[redacted]';

/** A path segment kept for viewers: a lowercase word ("hooks", "in"). Ids and tokens have digits or capitals. */
const PLAIN_SEGMENT = /^[a-z._-]{0,32}$/;

/** The query's parts as written; a bare one (`?s3cr3tT0ken`, no `=`) is a value, not a name. */
const queryParts = (url: URL): string[] => (url.search.length > 1 ? url.search.slice(1).split('&') : []);

function redactUrl(text: string): string {
  const url = new URL(text);
  const path = url.pathname.split('/').map((segment) => (PLAIN_SEGMENT.test(segment) ? segment : REDACTED)).join('/');
  const names = queryParts(url).map((part) => (part.includes('=') ? `${part.slice(0, part.indexOf('='))}=${REDACTED}` : REDACTED));
  return `${url.origin}${path}${url.search === '' ? '' : `?${names.join('&')}`}${url.hash === '' ? '' : `#${REDACTED}`}`;
}

function redactStep(step: WorkflowStep): WorkflowStep {
  if (step.type !== 'webhook') return step;
  const headers = Object.fromEntries(Object.keys(step.headers).map((name) => [name, REDACTED]));
  return { ...step, url: redactUrl(step.url), headers };
}

/** The workflow (or draft) with its webhook steps' header values and URL query values redacted. */
export const redactWorkflow = <T extends WorkflowDraft>(workflow: T): T => ({ ...workflow, steps: workflow.steps.map(redactStep) });

export const redactVersion = (version: WorkflowVersion): WorkflowVersion => ({ ...version, definition: redactWorkflow(version.definition) });

/** Shorter values are not searched for in answers: "v2" in a path is no secret, and would redact half a body. */
const MIN_SCRUBBED_LENGTH = 6;
/**
 * A receiver's answer is kept to its first 4 KiB: one cut in the middle of a credential it quotes
 * ends with that credential's start, which is masked from this many characters on (over a few
 * runs with other cut points a viewer would otherwise read all of it but the last character).
 */
const MIN_CUT_START = 4;

/** A path segment as a receiver may quote it, decoded; as written when it is not valid percent-encoding. */
function decodedOr(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * What a `Basic` authorization value carries, as a receiver that decoded it may quote it (a 401
 * page saying `user=… password=…`): `user:password` and the password.
 */
function basicCredentialsOf(value: string): string[] {
  const encoded = /^basic\s+([A-Za-z0-9+/=_-]+)$/i.exec(value.trim())?.[1];
  if (encoded === undefined) return [];
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? [decoded] : [decoded, decoded.slice(colon + 1)];
}

/** A word of a header value that is a token, not prose: "s3cr3t" of "Bearer s3cr3t", not "Bearer" or "application/json". */
const TOKEN_WORD = /^(?=.*\d|.*[a-z].*[A-Z]|.*[A-Z].*[a-z]).{8,}$/;
/** What separates the words of a header value or a path segment: spaces, and the punctuation of `name=value`, lists, quotes, parameters and paths. */
const WORD_SEPARATORS = /[\s,;:="'()/&]+/;

/** The token-like words of `text`, as a receiver may quote one alone (`Invalid token S3cretValue99` of `Token token="S3cretValue99"`). */
const tokenWordsOf = (text: string): string[] => text.split(WORD_SEPARATORS).filter((word) => TOKEN_WORD.test(word));

/**
 * The credential values a workflow's webhook steps carry, in the forms a receiver may quote them:
 * header values (and their token-like words, also inside `name=value`, quotes and lists), URL path
 * segments that are not plain words (as written, decoded, and their token-like words), query
 * values (decoded and as written) and fragments; each also escaped, once or more (escapedForms: a
 * receiver's JSON answer, one quoted in a later step's answer; "/" escaped or not).
 */
function credentialsOf(workflow: WorkflowDraft | undefined): string[] {
  const found = new Set<string>();
  for (const step of workflow?.steps ?? []) {
    if (step.type !== 'webhook') continue;
    for (const value of Object.values(step.headers)) {
      found.add(value);
      for (const word of tokenWordsOf(value)) found.add(word);
      for (const part of basicCredentialsOf(value)) found.add(part);
    }
    const url = new URL(step.url);
    for (const segment of url.pathname.split('/')) {
      if (PLAIN_SEGMENT.test(segment)) continue;
      found.add(segment).add(decodedOr(segment));
      // A parameter of a segment (`;token=…`) may be quoted alone.
      for (const word of tokenWordsOf(decodedOr(segment))) found.add(word);
    }
    for (const value of url.searchParams.values()) found.add(value);
    // A bare part is all value; a pair's value as written, and decoded.
    for (const value of queryParts(url).map((part) => part.slice(part.indexOf('=') + 1))) found.add(value).add(decodedOr(value));
    if (url.hash.length > 1) found.add(url.hash.slice(1));
  }
  const long = [...found].filter((value) => value.length >= MIN_SCRUBBED_LENGTH);
  return [...new Set(long.flatMap((value) => [value, ...escapedForms(value)]))];
}

/**
 * How many times over a credential is looked for escaped. A receiver's JSON answer escapes it once;
 * a later step's request quotes that answer (`results`), escaping it again, and a receiver echoing
 * that request once more: 5 covers a credential echoed through two more steps.
 */
const MAX_ESCAPE_DEPTH = 5;

const jsonEscaped = (text: string): string => JSON.stringify(text).slice(1, -1);
/** As some JSON writers (PHP's, json-c) escape: "/" too. */
const slashEscaped = (text: string): string => jsonEscaped(text).replaceAll('/', '\\/');

/**
 * Values longer than this are looked for escaped once only: credentials are shorter, and each escape
 * doubles a backslash (a workflow at the caps, 1,000 header values of 1 KiB of `\"`, took ~0.3 s of
 * every viewer read to make its deeper forms; ~0.08 s with one).
 */
const DEEP_FORMS_UP_TO = 256;

/**
 * `value` escaped once, twice, … (MAX_ESCAPE_DEPTH; once for a long value) by JSON writers all
 * along, by one that escapes "/" first and plain ones after, and by ones escaping "/" all along. A
 * form longer than an answer is kept (EVIDENCE_BODY_CAP) is never found whole in one: not made.
 */
function escapedForms(value: string): string[] {
  const forms: string[] = [];
  const maxDepth = value.length <= DEEP_FORMS_UP_TO ? MAX_ESCAPE_DEPTH : 1;
  const chain = (first: string, escape: (text: string) => string): void => {
    for (let form = first, depth = 1; form.length <= EVIDENCE_BODY_CAP; depth += 1) {
      forms.push(form);
      if (depth >= maxDepth) return;
      const next = escape(form);
      if (next === form) return;
      form = next;
    }
  };
  const once = jsonEscaped(value);
  chain(once, jsonEscaped);
  const slashOnce = once.replaceAll('/', '\\/');
  // Without a "/", the other writers' forms are these.
  if (slashOnce === once) return forms;
  chain(slashOnce, jsonEscaped);
  chain(slashOnce, slashEscaped);
  return forms;
}

/**
 * Characters a viewer's read of one run may search for credentials (each string's length times the
 * credentials searched in it): at most ~0.1 s of the event loop on text made to defeat the search
 * (~1 ns a unit on the dev VM; ordinary text ~0.02 ns), and room for 2,400 answers of 4 KiB against
 * 10 credentials. A workflow within the caps can carry 100,000 token-like words, and a run thousands
 * of 4 KiB answers: searching them all took 30 s, with every tenant waiting. Past the budget a string
 * reads as "[redacted]" whole (it is never shown unsearched).
 */
export const SCRUB_BUDGET = 100_000_000;
/** What searching a string costs beyond its length, per credential. */
const SEARCH_OVERHEAD = 16;

/** The credentials of one read and what is left of its SCRUB_BUDGET. */
interface Scrubbing {
  readonly credentials: readonly string[];
  /** Their lengths together: what looking for a cut start of each at a string's end costs. */
  readonly totalLength: number;
  left: number;
}

/** Takes `cost` from the read's budget: false, taking nothing, when not that much is left. */
function spend(scrubbing: Scrubbing, cost: number): boolean {
  if (cost > scrubbing.left) return false;
  scrubbing.left -= cost;
  return true;
}

/** `value` with every occurrence of a credential in its strings read as "[redacted]". */
function scrub(value: JsonValue | null, scrubbing: Scrubbing): JsonValue | null {
  if (scrubbing.credentials.length === 0 || value === null) return value;
  if (typeof value === 'string') {
    if (!spend(scrubbing, (value.length + SEARCH_OVERHEAD) * scrubbing.credentials.length)) return REDACTED;
    return maskOccurrences(value, scrubbing.credentials, REDACTED);
  }
  if (Array.isArray(value)) return value.map((item: JsonValue) => scrub(item, scrubbing) as JsonValue);
  if (typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, scrub(item, scrubbing) as JsonValue]));
}

type Fields = { readonly [key: string]: JsonValue };
const fieldsOf = (value: JsonValue | null): Fields | undefined => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Fields) : undefined);

/** Whether evidence records a receiver's answer kept only in part (cut at 4 KiB, or cut off). */
const wasCut = (evidence: JsonValue | null): boolean => fieldsOf(evidence)?.['body_truncated'] === true;

/**
 * `value` scrubbed; when `cut`, its `body` (a receiver's answer kept only in part) also loses the
 * start of a credential it ends with. Only such bodies are searched for that: the search costs a
 * credential's length for every string it looks at.
 */
function scrubAnswer(value: JsonValue | null, scrubbing: Scrubbing, cut: boolean): JsonValue | null {
  const scrubbed = scrub(value, scrubbing);
  const body = fieldsOf(scrubbed)?.['body'];
  if (!cut || typeof body !== 'string' || body === REDACTED) return scrubbed;
  const cost = (body.length + SEARCH_OVERHEAD) * scrubbing.credentials.length + scrubbing.totalLength;
  return { ...(scrubbed as Fields), body: spend(scrubbing, cost) ? maskOccurrences(body, scrubbing.credentials, REDACTED, MIN_CUT_START) : REDACTED };
}

/** Attempt evidence with its recorded `url` redacted as in the workflow, and the credentials scrubbed from the rest. */
function redactEvidence(evidence: JsonValue | null, scrubbing: Scrubbing): JsonValue | null {
  const scrubbed = scrubAnswer(evidence, scrubbing, wasCut(evidence));
  const url = fieldsOf(evidence)?.['url'];
  return typeof url === 'string' && URL.canParse(url) ? { ...(scrubbed as Fields), url: redactUrl(url) } : scrubbed;
}

/**
 * The run as a viewer sees it: its webhook attempts' URLs redacted, and the credentials of its
 * pinned `workflow` scrubbed from step results and evidence (a receiver that echoes its request,
 * or quotes it in an error page, would otherwise show them).
 */
export function redactRunView(run: RunView, workflow: WorkflowDraft | undefined, budget = SCRUB_BUDGET): RunView {
  const credentials = credentialsOf(workflow);
  const scrubbing: Scrubbing = { credentials, totalLength: credentials.reduce((sum, value) => sum + value.length, 0), left: budget };
  return {
    ...run,
    steps: run.steps.map((step) => ({
      ...step,
      // A webhook step's result is the answer its succeeded attempt recorded.
      result: scrubAnswer(step.result, scrubbing, step.attempts.some((a) => a.outcome === 'succeeded' && wasCut(a.evidence))),
      attempts: step.attempts.map((a) => ({
        ...a,
        evidence: redactEvidence(a.evidence, scrubbing),
        after_cancel: a.after_cancel === null ? null : { ...a.after_cancel, evidence: redactEvidence(a.after_cancel.evidence, scrubbing) },
      })),
    })),
  };
}
