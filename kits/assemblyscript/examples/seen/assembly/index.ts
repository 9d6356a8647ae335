// The smallest action, as the kit's README shows it: answers {"seen": <payload.id>}, or rejects a
// payload without an id. Built and run by test/kits/kits.test.ts, so the README's snippet compiles.
import { Envelope, JsonValue, runAction } from "../../../assembly/index";
export { alloc } from "../../../assembly/index";

export function execute(ptr: i32, len: i32): i32 {
  return runAction(ptr, len, handle);
}

function handle(envelope: Envelope): JsonValue | null {
  const id = envelope.payload.get("id");
  if (id == null) return null; // reject: execute returns 0
  return JsonValue.newObject().set("seen", JsonValue.ofView(id));
}
