// Names people read: an organization's, a workflow's, a custom action's. They are listed in the API,
// the CLI and dashboards, so each must show as written: no character a terminal acts on (controls,
// C1 ones too, line and paragraph separators, direction overrides) or that shows as nothing
// (zero-width spaces, fillers, tag characters), the set terminal-text.ts escapes; and something
// besides white space. A name of zero-width spaces listed as blank, and a C1 CSI could start a
// terminal escape (found by a hostile-text probe).

import { InputError } from '../errors.ts';
import { hasUnprintable } from '../terminal-text.ts';

/** 400 `invalid_request` naming `field` unless `name` is a display name (above). */
export function assertDisplayName(name: string, field: string): void {
  if (hasUnprintable(name)) {
    throw new InputError(400, 'invalid_request', `Field "${field}" must hold only characters that show: no control characters, line or paragraph separators, direction controls or invisible characters.`, { field });
  }
  if (name.trim() === '') throw new InputError(400, 'invalid_request', `Field "${field}" must not be only white space.`, { field });
}
