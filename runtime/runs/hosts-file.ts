// The names the hosts file (/etc/hosts) gives addresses to, as webhook steps look them up before
// DNS (receiver-lookup.ts), the order the system resolver uses. Read again when the file changes
// (watched-file.ts); a file that cannot be read names nothing.

import { isIP } from 'node:net';
import { WatchedFile } from './watched-file.ts';

export const HOSTS_PATH = '/etc/hosts';

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
  readonly #file: WatchedFile<Map<string, HostAddress[]>>;

  constructor(path = HOSTS_PATH) {
    this.#file = new WatchedFile(path, parseHosts);
  }

  /** The addresses the file gives `hostname`, or undefined when it names it not. */
  addresses(hostname: string): readonly HostAddress[] | undefined {
    return this.#file.value.get(hostname.toLowerCase().replace(/\.$/, ''));
  }
}
