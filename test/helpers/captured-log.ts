// A Logger that keeps each line's level and message, for tests that check what was said (and at
// what level) without parsing JSON output.

import type { Logger } from '../../runtime/log.ts';

export interface CapturedLine {
  readonly level: string;
  readonly message: string;
}

export function capturedLog(): { readonly logger: Logger; readonly lines: CapturedLine[] } {
  const lines: CapturedLine[] = [];
  const at = (level: string) => (message: string): void => void lines.push({ level, message });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}
