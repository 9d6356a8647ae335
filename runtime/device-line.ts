// A message typed for `sluice device`, sent with its `id` first: Sluice reads the id of a message it
// turns away unread (back-pressure, `server_busy`) from a frame's first bytes, and a frame that
// does not open with it costs a parse and counts against the org's refusal budget
// (triggers/device-messages.ts). Only the order changes: every member keeps the text it was typed
// with (a number past 2^53 stays as written).

import { membersText } from './validation/json-member-text.ts';

/**
 * `line` with its `id` member moved first, or `line` as given when it is no JSON object, names no
 * string id, or opens with it already. A repeated `id` goes once, with the value JSON.parse keeps
 * (the last), so the id read first is the one the message has.
 */
export function idFirst(line: string): string {
  let id: unknown;
  try {
    id = (JSON.parse(line) as { id?: unknown } | null)?.id;
  } catch {
    return line;
  }
  if (typeof id !== 'string') return line;
  const members = membersText(line);
  if (members === undefined) return line;
  const ids = members.filter((member) => member.name === 'id');
  const kept = ids.at(-1);
  if (kept === undefined || (ids.length === 1 && members[0] === kept && kept.nameText === '"id"')) return line;
  // Written plainly: a name typed with escapes (`"\u0069d"`) is the same name, but not the opening Sluice looks for.
  const rest = members.filter((member) => member.name !== 'id').map(({ nameText, valueText }) => `,${nameText}:${valueText}`);
  return `{"id":${kept.valueText}${rest.join('')}}`;
}
