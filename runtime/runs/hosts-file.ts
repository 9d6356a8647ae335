// The names the hosts file (/etc/hosts) gives addresses to, as webhook steps look them up before
// DNS (receiver-lookup.ts), the order the system resolver uses. Read again when the file changes,
// checked at most every few seconds; a file that cannot be read names nothing.

import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';

export const HOSTS_PATH = '/etc/hosts';
/** How often a lookup may check whether the file changed. */
const RECHECK_MS = 5000;

export interface HostAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** name (lower case) -> its addresses in file order: `address name alias...` lines, `#` comments. */
function parseHosts(text: string): Map<string, HostAddress[]> {
  const names = new Map<string, HostAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...hostnames] = (line.split('#', 1)[0] ?? '').trim().split(/\s+/);
    const family = isIP(address ?? '');
    if (address === undefined || (family !== 4 && family !== 6)) continue;
    for (const name of hostnames) {
      const key = name.toLowerCase();
      const known = names.get(key) ?? [];
      if (!known.some((entry) => entry.address === address)) known.push({ address, family });
      names.set(key, known);
    }
  }
  return names;
}

export class HostsFile {
  readonly #path: string;
  #names = new Map<string, HostAddress[]>();
  #mtimeMs = Number.NaN;
  #checkedAt = Number.NEGATIVE_INFINITY;

  constructor(path = HOSTS_PATH) {
    this.#path = path;
  }

  /** The addresses the file gives `hostname`, or undefined when it names it not. */
  addresses(hostname: string): readonly HostAddress[] | undefined {
    this.#refresh();
    return this.#names.get(hostname.toLowerCase().replace(/\.$/, ''));
  }

  #refresh(): void {
    const now = performance.now();
    if (now - this.#checkedAt < RECHECK_MS) return;
    this.#checkedAt = now;
    let mtimeMs: number;
    try {
      mtimeMs = statSync(this.#path).mtimeMs;
      if (mtimeMs === this.#mtimeMs) return;
      this.#names = parseHosts(readFileSync(this.#path, 'utf8'));
    } catch {
      this.#names = new Map();
      mtimeMs = Number.NaN;
    }
    this.#mtimeMs = mtimeMs;
  }
}
