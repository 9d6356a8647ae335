// Entry of the AssemblyScript kit: the guest ABI (DESIGN 6.5) around a handler that receives the
// envelope as validated JSON views and returns the output document built from JsonValues.
// An action re-exports `alloc` and calls runAction from its own `execute` export.
import { JsonKind, JsonView } from "./json-view";
import { JsonValue } from "./json-value";
import { parseJson } from "./json-validate";
import { writeDocument } from "./json-write";

export { JsonCursor, JsonKind, JsonView } from "./json-view";
export { JsonValue, ValueKind } from "./json-value";
export { MAX_DEPTH, parseJson } from "./json-validate";
export { MAX_OUTPUT_BYTES } from "./json-write";

/** The input envelope; a member the host left out is a JSON null. */
export class Envelope {
  payload: JsonView;
  secrets: JsonView;
  permissions: JsonView;
  action: JsonView;

  constructor(root: JsonView) {
    this.payload = memberOrNull(root, "payload");
    this.secrets = memberOrNull(root, "secrets");
    this.permissions = memberOrNull(root, "permissions");
    this.action = memberOrNull(root, "action");
  }

  /** The secret `key` as text, or null when the host did not inject it (no permission, unset). */
  secret(key: string): string | null {
    const value = this.secrets.get(key);
    return value == null ? null : value.asString();
  }

  /** Whether the approved permissions include `permission` exactly. */
  hasPermission(permission: string): bool {
    const cursor = this.permissions.cursor();
    while (cursor.next()) {
      const granted = cursor.value!.asString();
      if (granted != null && granted == permission) return true;
    }
    return false;
  }
}

/** Returns the output document, or null to reject the payload (execute returns 0). */
export type Handler = (envelope: Envelope) => JsonValue | null;

// A JSON null outside any input, for members the host left out.
const NULL_TEXT = memory.data<u8>([0x6e, 0x75, 0x6c, 0x6c]);

function memberOrNull(root: JsonView, key: string): JsonView {
  const value = root.get(key);
  return value != null ? value : parseJson(NULL_TEXT, 4)!;
}

/**
 * The host's input buffer. The stub runtime never frees, and every run gets a fresh
 * instance, so a bump allocation is all that is needed.
 */
export function alloc(len: i32): i32 {
  if (len < 0) unreachable();
  return <i32>heap.alloc(<usize>len);
}

/**
 * The body of `execute`: validates the envelope at [ptr, ptr + len), calls `handler`, writes
 * its document. Returns 0 (rejected) when the input is not a JSON object or the handler
 * returns null.
 */
export function runAction(ptr: i32, len: i32, handler: Handler): i32 {
  const root = parseJson(<usize>ptr, <usize>len);
  if (root == null || root.kind != JsonKind.Object) return 0;
  const document = handler(new Envelope(root));
  if (document == null) return 0;
  return <i32>writeDocument(document);
}
