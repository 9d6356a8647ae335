/* The smallest action, as the kit's README shows it: answers {"seen": <payload.id>}, or rejects a
 * payload without an id. Built and run by test/kits/kits.test.ts, so the README's snippet compiles. */
#include "../../sluice_action.h"

static bool handle(const sl_envelope *env) {
  sl_value id = sl_get(env->payload, "id");
  if (sl_kind_of(id) == SL_MISSING) return false; /* reject: execute returns 0 */
  sl_begin_object(); sl_key("seen"); sl_raw(id); sl_end_object();
  return true;
}

SLUICE_ACTION(handle)
