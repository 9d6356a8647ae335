// This process's open-file limit, as Linux reports it in /proc/self/limits (Node raises its soft
// limit to the hard one at start): what the WebSocket total and the outbound socket total are cut from.

import { readFileSync } from 'node:fs';

/** The soft open-file limit; undefined when it cannot be read (not Linux) or is unlimited. */
export function openFileLimit(limits = readProcLimits()): number | undefined {
  const soft = /^Max open files\s+(\d+)/m.exec(limits ?? '')?.[1];
  return soft === undefined ? undefined : Number(soft);
}

function readProcLimits(): string | undefined {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
}
