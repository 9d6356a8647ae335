// The order-risk-scorer spec (kits/assemblyscript/examples/order-risk-scorer/README.md) as plain
// TypeScript: the exact output document every kit's scorer must produce, or null for "rejected".

const DEFAULT_THRESHOLD = 70;
const MAX_ID_BYTES = 64;
const MAX_NUMERIC_ID = 999_999_999_999_999;
const MAX_ITEM_QUANTITY = 1000;

type JsonObject = { readonly [key: string]: unknown };

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const member = (value: unknown, key: string): unknown =>
  isObject(value) && Object.hasOwn(value, key) ? value[key] : undefined;

function orderId(value: unknown): string | number | null {
  if (typeof value === 'string') {
    const bytes = Buffer.byteLength(value, 'utf8');
    return bytes >= 1 && bytes <= MAX_ID_BYTES && value !== '.' && value !== '..' ? value : null;
  }
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_NUMERIC_ID) {
    return value;
  }
  return null;
}

function threshold(secrets: unknown): { value: number; source: string } {
  if (!isObject(secrets) || !Object.hasOwn(secrets, 'RISK_THRESHOLD')) return { value: DEFAULT_THRESHOLD, source: 'default' };
  const secret = secrets['RISK_THRESHOLD'];
  if (typeof secret === 'string' && /^[0-9]{1,3}$/.test(secret) && Number(secret) <= 100) {
    return { value: Number(secret), source: 'secret' };
  }
  return { value: DEFAULT_THRESHOLD, source: 'invalid_secret' };
}

function country(address: unknown): string {
  const value = member(address, 'country');
  return typeof value === 'string' ? value : '';
}

function itemQuantity(items: unknown): number {
  if (!Array.isArray(items)) return 0;
  let total = 0;
  for (const item of items) {
    const quantity = member(item, 'quantity');
    // An integer literal the kits read as an i64: a double of 2^63 or more was written past it.
    total += typeof quantity === 'number' && Number.isInteger(quantity) && quantity >= 1 && quantity < 2 ** 63 ? Math.min(quantity, MAX_ITEM_QUANTITY) : 1;
  }
  return total;
}

/**
 * The expected output for `payload`/`secrets` as JS values. Only exact for payloads whose
 * numbers are written as plain integer literals (the kits treat `1e5` or `1000.0` as
 * non-integers, which JSON.parse cannot tell apart); cases with such literals pin their
 * expected output by hand.
 */
export function expectedRiskOutput(payload: unknown, secrets: unknown): string | null {
  if (!isObject(payload)) return null;
  const id = orderId(member(payload, 'order_id'));
  if (id === null) return null;
  const limit = threshold(secrets);

  let score = 0;
  const reasons: string[] = [];
  const add = (points: number, reason: string): void => {
    score += points;
    reasons.push(reason);
  };

  const amount = member(payload, 'amount_cents');
  const cents = typeof amount === 'number' && Number.isSafeInteger(amount) ? amount : null;
  const c = cents ?? 0;
  if (c >= 100_000) add(40, 'amount_high');
  else if (c >= 50_000) add(25, 'amount_elevated');
  else if (c >= 10_000) add(10, 'amount_moderate');

  const billing = country(member(payload, 'billing'));
  const shipping = country(member(payload, 'shipping'));
  if (billing === '' || shipping === '') add(10, 'address_incomplete');
  else if (billing !== shipping) add(25, 'country_mismatch');

  const quantity = itemQuantity(member(payload, 'items'));
  if (quantity > 10) add(15, 'many_items');
  else if (quantity > 5) add(8, 'several_items');

  if (member(member(payload, 'customer'), 'new') === true) add(20, 'new_customer');

  score = Math.min(score, 100);
  const status = score > limit.value ? 'held_for_review' : 'approved';
  return JSON.stringify({
    score,
    projection: {
      name: 'order_risk',
      entity_type: 'order',
      entity_id: id,
      title: `Order ${id}: risk ${score}/100`,
      status,
      data: {
        threshold: limit.value,
        threshold_source: limit.source,
        amount_cents: cents,
        item_quantity: quantity,
        reasons,
      },
    },
    derived_event: { type: 'orders.risk_scored', payload: { order_id: id, score, status } },
  });
}
