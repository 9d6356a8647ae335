// What one execution of a guest produced, as stored in the invocation ledger and sent on the wire.
// Pure data and conversions; the sandbox's own outcome type is translated once, here.
import type { SandboxOutcome } from './sandbox.ts';
import { isWireTrapKind, type InvokeOutcome, type InvokeReplyWire } from './wire.ts';

export type InvocationOutcome = InvokeOutcome;

export interface InvocationResult {
  readonly outcome: InvocationOutcome;
  readonly fuelUsed: number;
}

/** Why a module rejected a payload: the only way it can, as a clause the caller words a sentence around. */
export const REJECTED_REASON = 'execute returned 0';

/**
 * A trap message names up to 8 backtrace frames by the module's own function names, which a
 * hostile module can make megabytes long; the message is stored, sent and shown, so it is cut.
 */
export const MAX_TRAP_MESSAGE_CHARS = 2048;

const capped = (message: string): string =>
  message.length <= MAX_TRAP_MESSAGE_CHARS ? message : `${message.slice(0, MAX_TRAP_MESSAGE_CHARS - 1)}…`;

/**
 * Translates the sandbox's outcome. Output that is not a JSON document is an ABI violation of the
 * guest (DESIGN.md §6.5), reported as an `abi_error` trap rather than handed to the runtime.
 */
export function createInvocationResult(outcome: SandboxOutcome): InvocationResult {
  switch (outcome.kind) {
    case 'output':
      try {
        JSON.parse(outcome.output);
      } catch (error) {
        const message = `The module output (${outcome.output.length} characters) is not a JSON document: ${parseFailure(error)}.`;
        return { outcome: { kind: 'trap', trap: 'abi_error', message }, fuelUsed: outcome.fuelUsed };
      }
      return { outcome: { kind: 'output', outputJson: outcome.output }, fuelUsed: outcome.fuelUsed };
    case 'rejected':
      return { outcome: { kind: 'rejected', reason: REJECTED_REASON }, fuelUsed: outcome.fuelUsed };
    case 'trap':
      return {
        outcome: { kind: 'trap', trap: isWireTrapKind(outcome.trap) ? outcome.trap : 'other', message: capped(outcome.message) },
        fuelUsed: outcome.fuelUsed,
      };
  }
}

/**
 * What JSON.parse found wrong, without the text V8 quotes around it: output that does not parse
 * is never masked (output-secrets.ts), so none of it may reach a message. V8 quotes it after the
 * complaint as `, "…" is not valid JSON`, or a window of it as `, "…"...`, `, ..."…"...` or
 * `, ..."…"`: everything from that comma on goes. So does the character in `Unexpected token 'S'`:
 * the first of a secret written out bare.
 */
function parseFailure(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const quoted = message.search(/, (?:\.\.\.)?"/);
  const complaint = (quoted === -1 ? message : message.slice(0, quoted)).replace(/\.$/, '');
  return /^Unexpected token /.test(complaint) ? 'Unexpected token (not shown: the output is never quoted)' : complaint;
}

export function toInvokeReply(result: InvocationResult, replayed: boolean): InvokeReplyWire {
  const base = { fuel_used: String(result.fuelUsed), replayed };
  const { outcome } = result;
  switch (outcome.kind) {
    case 'output':
      return { ...base, output_json: outcome.outputJson };
    case 'rejected':
      return { ...base, rejected: { reason: outcome.reason } };
    case 'trap':
      return { ...base, trap: { kind: outcome.trap, message: outcome.message } };
  }
}
