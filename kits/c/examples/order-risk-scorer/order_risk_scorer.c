/* The order-risk-scorer action in C; the rules (and the exact output bytes, shared with the
 * AssemblyScript and Rust versions) are in kits/assemblyscript/examples/order-risk-scorer/README.md. */
#include "../../sluice_action.h"

#define DEFAULT_THRESHOLD 70
#define MAX_ID_BYTES 64
#define MAX_NUMERIC_ID 999999999999999LL
#define MAX_ITEM_QUANTITY 1000
/* The largest integer the host takes as a number in an output (2^53 - 1). */
#define MAX_SAFE_AMOUNT 9007199254740991LL

typedef struct {
  bool is_text;
  sl_value text; /* when is_text */
  int64_t number;
} order_id;

/* A usable id is a 1..64-byte string other than "." and ".." (the host refuses them as an
   entity_id) or an integer in 0..999999999999999. */
static bool read_order_id(sl_value value, order_id *id) {
  if (sl_kind_of(value) == SL_STRING) {
    size_t len = sl_str_len(value);
    if (len == 0 || len > MAX_ID_BYTES || sl_str_eq(value, ".") || sl_str_eq(value, "..")) return false;
    id->is_text = true;
    id->text = value;
    return true;
  }
  int64_t n;
  if (!sl_as_i64(value, &n) || n < 0 || n > MAX_NUMERIC_ID) return false;
  id->is_text = false;
  id->number = n;
  return true;
}

static void write_id(const order_id *id) {
  if (id->is_text) sl_str_json(id->text);
  else sl_i64(id->number);
}

/* RISK_THRESHOLD must be 1-3 ASCII digits with a value of at most 100. */
static int64_t read_threshold(sl_value secret, const char **source) {
  *source = "default";
  if (secret.n == 0) return DEFAULT_THRESHOLD;
  *source = "invalid_secret";
  uint8_t digits[3];
  size_t len;
  if (!sl_str_copy(secret, digits, sizeof digits, &len) || len == 0) return DEFAULT_THRESHOLD;
  int64_t value = 0;
  for (size_t i = 0; i < len; i++) {
    if (digits[i] < '0' || digits[i] > '9') return DEFAULT_THRESHOLD;
    value = value * 10 + (digits[i] - '0');
  }
  if (value > 100) return DEFAULT_THRESHOLD;
  *source = "secret";
  return value;
}

/* The non-empty `country` string of an address object, or missing. */
static sl_value country(sl_value address) {
  sl_value text = sl_get(address, "country");
  if (sl_kind_of(text) != SL_STRING || text.n == 2) return SL_MISSING_VALUE;
  return text;
}

/* Sum of item quantities: an integer >= 1 counts (capped at 1000), anything else counts 1. */
static int64_t item_quantity(sl_value items) {
  if (sl_kind_of(items) != SL_ARRAY) return 0;
  int64_t total = 0;
  sl_iter it = sl_items(items);
  sl_value item;
  while (sl_next_item(&it, &item)) {
    int64_t q;
    if (sl_as_i64(sl_get(item, "quantity"), &q) && q >= 1) total += q < MAX_ITEM_QUANTITY ? q : MAX_ITEM_QUANTITY;
    else total += 1;
  }
  return total;
}

static bool score_order(const sl_envelope *env) {
  sl_value order = env->payload;
  order_id id;
  if (sl_kind_of(order) != SL_OBJECT || !read_order_id(sl_get(order, "order_id"), &id)) return false;
  const char *threshold_source;
  int64_t threshold = read_threshold(sl_get(env->secrets, "RISK_THRESHOLD"), &threshold_source);

  int64_t score = 0;
  const char *reasons[4];
  int reason_count = 0;
#define ADD(points, reason) (score += (points), reasons[reason_count++] = (reason))

  int64_t cents = 0;
  bool has_amount = sl_as_i64(sl_get(order, "amount_cents"), &cents);
  if (has_amount && (cents > MAX_SAFE_AMOUNT || cents < -MAX_SAFE_AMOUNT)) {
    has_amount = false;
    cents = 0;
  }
  if (cents >= 100000) ADD(40, "amount_high");
  else if (cents >= 50000) ADD(25, "amount_elevated");
  else if (cents >= 10000) ADD(10, "amount_moderate");

  sl_value billing = country(sl_get(order, "billing"));
  sl_value shipping = country(sl_get(order, "shipping"));
  if (billing.n == 0 || shipping.n == 0) ADD(10, "address_incomplete");
  else if (!sl_str_same(billing, shipping)) ADD(25, "country_mismatch");

  int64_t quantity = item_quantity(sl_get(order, "items"));
  if (quantity > 10) ADD(15, "many_items");
  else if (quantity > 5) ADD(8, "several_items");

  if (sl_is_true(sl_get(sl_get(order, "customer"), "new"))) ADD(20, "new_customer");
#undef ADD

  if (score > 100) score = 100;
  const char *status = score > threshold ? "held_for_review" : "approved";

  sl_begin_object();
  sl_key("score"); sl_i64(score);
  sl_key("projection"); sl_begin_object();
  sl_key("name"); sl_str("order_risk");
  sl_key("entity_type"); sl_str("order");
  sl_key("entity_id"); write_id(&id);
  sl_key("title"); sl_begin_string();
  sl_string_part("Order ");
  if (id.is_text) sl_string_part_json(id.text);
  else sl_string_part_i64(id.number);
  sl_string_part(": risk "); sl_string_part_i64(score); sl_string_part("/100");
  sl_end_string();
  sl_key("status"); sl_str(status);
  sl_key("data"); sl_begin_object();
  sl_key("threshold"); sl_i64(threshold);
  sl_key("threshold_source"); sl_str(threshold_source);
  sl_key("amount_cents");
  if (has_amount) sl_i64(cents);
  else sl_null();
  sl_key("item_quantity"); sl_i64(quantity);
  sl_key("reasons"); sl_begin_array();
  for (int i = 0; i < reason_count; i++) sl_str(reasons[i]);
  sl_end_array();
  sl_end_object();
  sl_end_object();
  sl_key("derived_event"); sl_begin_object();
  sl_key("type"); sl_str("orders.risk_scored");
  sl_key("payload"); sl_begin_object();
  sl_key("order_id"); write_id(&id);
  sl_key("score"); sl_i64(score);
  sl_key("status"); sl_str(status);
  sl_end_object();
  sl_end_object();
  sl_end_object();
  return true;
}

SLUICE_ACTION(score_order)
