// The reference order-risk-scorer action in AssemblyScript; the rules it implements (and that
// the Rust and C twins must match byte for byte) are specified in ../README.md.
import { Envelope, JsonKind, JsonValue, JsonView, runAction } from "../../../assembly/index";

export { alloc } from "../../../assembly/index";

export function execute(ptr: i32, len: i32): i32 {
  return runAction(ptr, len, scoreOrder);
}

const DEFAULT_THRESHOLD: i64 = 70;
const MAX_ID_BYTES: i32 = 64;
const MAX_NUMERIC_ID: i64 = 999_999_999_999_999;
const MAX_ITEM_QUANTITY: i64 = 1000;
/** The largest integer the host takes as a number in an output (2^53 - 1). */
const MAX_SAFE_AMOUNT: i64 = 9_007_199_254_740_991;

// Results of the helpers below (AssemblyScript has no tuples): the order id as written to the
// output, its text for the title, and the threshold with where it came from.
let orderIdValue: JsonValue = JsonValue.ofNull();
let orderIdText: string = "";
let threshold: i64 = DEFAULT_THRESHOLD;
let thresholdSource: string = "default";

function scoreOrder(envelope: Envelope): JsonValue | null {
  const order = envelope.payload;
  if (order.kind != JsonKind.Object) return null;
  if (!readOrderId(order.get("order_id"))) return null;
  readThreshold(envelope.secrets.get("RISK_THRESHOLD"));

  let score: i64 = 0;
  const reasons = JsonValue.newArray();

  const amount = order.get("amount_cents");
  const hasAmount = amount != null && amount.isI64() && amount.toI64() <= MAX_SAFE_AMOUNT && amount.toI64() >= -MAX_SAFE_AMOUNT;
  const cents: i64 = hasAmount ? amount!.toI64() : 0;
  if (cents >= 100000) {
    score += 40;
    reasons.push(JsonValue.ofString("amount_high"));
  } else if (cents >= 50000) {
    score += 25;
    reasons.push(JsonValue.ofString("amount_elevated"));
  } else if (cents >= 10000) {
    score += 10;
    reasons.push(JsonValue.ofString("amount_moderate"));
  }

  const billing = country(order.get("billing"));
  const shipping = country(order.get("shipping"));
  if (billing.length == 0 || shipping.length == 0) {
    score += 10;
    reasons.push(JsonValue.ofString("address_incomplete"));
  } else if (billing != shipping) {
    score += 25;
    reasons.push(JsonValue.ofString("country_mismatch"));
  }

  const quantity = itemQuantity(order.get("items"));
  if (quantity > 10) {
    score += 15;
    reasons.push(JsonValue.ofString("many_items"));
  } else if (quantity > 5) {
    score += 8;
    reasons.push(JsonValue.ofString("several_items"));
  }

  const customer = order.get("customer");
  const isNew = customer != null ? customer.get("new") : null;
  if (isNew != null && isNew.isTrue()) {
    score += 20;
    reasons.push(JsonValue.ofString("new_customer"));
  }

  if (score > 100) score = 100;
  const status = score > threshold ? "held_for_review" : "approved";

  const data = JsonValue.newObject()
    .set("threshold", JsonValue.ofI64(threshold))
    .set("threshold_source", JsonValue.ofString(thresholdSource))
    .set("amount_cents", hasAmount ? JsonValue.ofI64(cents) : JsonValue.ofNull())
    .set("item_quantity", JsonValue.ofI64(quantity))
    .set("reasons", reasons);
  const projection = JsonValue.newObject()
    .set("name", JsonValue.ofString("order_risk"))
    .set("entity_type", JsonValue.ofString("order"))
    .set("entity_id", orderIdValue)
    .set("title", JsonValue.ofString("Order " + orderIdText + ": risk " + score.toString() + "/100"))
    .set("status", JsonValue.ofString(status))
    .set("data", data);
  const derivedPayload = JsonValue.newObject()
    .set("order_id", orderIdValue)
    .set("score", JsonValue.ofI64(score))
    .set("status", JsonValue.ofString(status));
  const derivedEvent = JsonValue.newObject()
    .set("type", JsonValue.ofString("orders.risk_scored"))
    .set("payload", derivedPayload);
  return JsonValue.newObject()
    .set("score", JsonValue.ofI64(score))
    .set("projection", projection)
    .set("derived_event", derivedEvent);
}

/** A usable id is a 1..64-byte string or an integer in 0..999999999999999. */
function readOrderId(id: JsonView | null): bool {
  if (id == null) return false;
  if (id.kind == JsonKind.String) {
    const bytes = id.utf8Length();
    if (bytes == 0 || bytes > MAX_ID_BYTES) return false;
    orderIdText = id.asString()!;
    // "." and ".." are no entity_id the host takes (URL clients read them as path segments).
    if (orderIdText == "." || orderIdText == "..") return false;
    orderIdValue = JsonValue.ofString(orderIdText);
    return true;
  }
  if (!id.isI64()) return false;
  const value = id.toI64();
  if (value < 0 || value > MAX_NUMERIC_ID) return false;
  orderIdValue = JsonValue.ofI64(value);
  orderIdText = value.toString();
  return true;
}

/** RISK_THRESHOLD must be 1-3 ASCII digits with a value of at most 100. */
function readThreshold(secret: JsonView | null): void {
  threshold = DEFAULT_THRESHOLD;
  thresholdSource = "default";
  if (secret == null) return;
  thresholdSource = "invalid_secret";
  const text = secret.asString();
  if (text == null || text.length == 0 || text.length > 3) return;
  let value: i64 = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return;
    value = value * 10 + <i64>(c - 48);
  }
  if (value > 100) return;
  threshold = value;
  thresholdSource = "secret";
}

/** The `country` string of an address object; empty when absent or not a string. */
function country(address: JsonView | null): string {
  if (address == null) return "";
  const value = address.get("country");
  if (value == null) return "";
  const text = value.asString();
  return text == null ? "" : text;
}

/** Sum of item quantities: an integer >= 1 counts (capped at 1000), anything else counts 1. */
function itemQuantity(items: JsonView | null): i64 {
  if (items == null || items.kind != JsonKind.Array) return 0;
  let total: i64 = 0;
  const cursor = items.cursor();
  while (cursor.next()) {
    const quantity = cursor.value!.get("quantity");
    let counted: i64 = 1;
    if (quantity != null && quantity.isI64() && quantity.toI64() >= 1) {
      counted = quantity.toI64() < MAX_ITEM_QUANTITY ? quantity.toI64() : MAX_ITEM_QUANTITY;
    }
    total += counted;
  }
  return total;
}
