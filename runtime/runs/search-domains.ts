// The names a receiver's name stands for, as the system resolver tries them: resolv.conf's search
// list (`search`, or `domain`; LOCALDOMAIN overrides both) and `ndots` (RES_OPTIONS too). A name
// with at least `ndots` dots is tried as written first, then under each search domain; one with
// fewer, under the search domains first (so `billing-svc` finds `billing-svc.corp.example`, and
// Kubernetes' short service names resolve); a name ending in a dot is tried as written only.

import { WatchedFile } from './watched-file.ts';

export const RESOLV_CONF_PATH = '/etc/resolv.conf';
/** resolv.conf(5): at most 6 search domains are used. */
const MAX_SEARCH_DOMAINS = 6;
const MAX_NDOTS = 15;

/** The environment's overrides of resolv.conf, as libc reads them (config.ts reads them from the process). */
export interface SearchEnv {
  readonly LOCALDOMAIN?: string | undefined;
  readonly RES_OPTIONS?: string | undefined;
}

export interface SearchRules {
  readonly search: readonly string[];
  readonly ndots: number;
}

function ndotsIn(options: readonly string[], fallback: number): number {
  let ndots = fallback;
  for (const option of options) {
    const match = /^ndots:(\d+)$/.exec(option);
    if (match !== null) ndots = Math.min(Number(match[1]), MAX_NDOTS);
  }
  return ndots;
}

/** The search rules `text` (a resolv.conf) and the environment give. */
export function parseSearchRules(text: string, env: SearchEnv = {}): SearchRules {
  let search: string[] = [];
  let options: string[] = [];
  for (const line of text.split('\n')) {
    const [keyword, ...values] = (line.split(/[#;]/, 1)[0] ?? '').trim().split(/\s+/);
    // The last `search` or `domain` line wins.
    if (keyword === 'search') search = values;
    else if (keyword === 'domain') search = values.slice(0, 1);
    else if (keyword === 'options') options = [...options, ...values];
  }
  const local = env.LOCALDOMAIN?.trim();
  if (local !== undefined && local !== '') search = local.split(/\s+/);
  const fromEnv = env.RES_OPTIONS?.trim().split(/\s+/) ?? [];
  const domains = search.map((domain) => domain.replace(/^\.+|\.+$/g, '')).filter((domain) => domain !== '');
  return { search: domains.slice(0, MAX_SEARCH_DOMAINS), ndots: ndotsIn([...options, ...fromEnv], 1) };
}

/** The names to try for `hostname`, in order. */
export function candidateNames(hostname: string, rules: SearchRules): string[] {
  if (hostname.endsWith('.')) return [hostname.slice(0, -1)];
  const searched = rules.search.map((domain) => `${hostname}.${domain}`);
  const dots = hostname.split('.').length - 1;
  return dots >= rules.ndots ? [hostname, ...searched] : [...searched, hostname];
}

/** resolv.conf's search rules, read again when it changes. */
export class ResolvConf {
  readonly #file: WatchedFile<SearchRules>;

  constructor(path = RESOLV_CONF_PATH, env: SearchEnv = {}) {
    this.#file = new WatchedFile(path, (text) => parseSearchRules(text, env));
  }

  candidates(hostname: string): string[] {
    return candidateNames(hostname, this.#file.value);
  }
}
