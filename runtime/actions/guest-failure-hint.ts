// What a kit user reads next to a custom action's trap or rejection: the kits turn several causes
// into the same guest outcome (a probe found four, among them output over 256 KB and memory run
// out, all reading only "wasm 'unreachable' instruction executed"), so the message names them.

import type { WireTrapKind } from '../../hook-runner/wire.ts';

/** The likely causes of a trap of this kind, said after its message; empty for kinds that say it themselves. */
export function trapHint(kind: WireTrapKind): string {
  return kind === 'unreachable'
    ? " (an abort or panic in the action's code; the kits trap so too when the output passes 256 KB or the guest's memory runs out)"
    : '';
}

/** Why `execute` may have returned 0: the action's own refusal, or its kit's check of the input before the handler ran. */
export const REJECTION_HINT = "the action's own refusal, or its kit's check of the payload before the handler ran: not strict JSON, nesting past 128 levels, or a lone surrogate escape such as \\ud800";
