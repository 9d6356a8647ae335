// This process's open-file limit, as Linux reports it in /proc/self/limits (Node raises its soft
// limit to the hard one at start): what the WebSocket total and the outbound socket total are cut
// from, once the descriptors the process holds whatever its load are set aside. Cut from the whole
// limit, the two totals alone came to more than a limit of 256 (192 + 64, with ~30 held at idle):
// webhook steps failed `sluice_out_of_file_descriptors` within their total, and ingest on new
// connections waited seconds for a descriptor.

import { readFileSync } from 'node:fs';

/**
 * Descriptors set aside before the totals are cut: the ledger's files, the hook-runner's channel
 * and its child's pipes, stdio and the event loop's own (about 30 at idle), and room for HTTP.
 */
export const RESERVED_FILES = 64;

/** Below this limit a start warns: the totals cut from it are small for production. */
export const LOW_FILE_LIMIT = 1024;

/** What the WebSocket and webhook socket totals are cut from: the limit less RESERVED_FILES. */
export const sharedFiles = (limit: number): number => Math.max(0, limit - RESERVED_FILES);

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
