// Envelopes for the order-risk-scorer conformance run, each with the exact output every kit
// must produce (or null: rejected): hand-picked edge cases plus seeded random orders.
import { expectedRiskOutput } from './order-risk-reference.ts';

export interface RiskCase {
  readonly name: string;
  /** The envelope text exactly as the host would hand it to the guest. */
  readonly envelope: string;
  readonly expected: string | null;
}

const PERMISSIONS = ['read_secret:RISK_THRESHOLD'];
const ACTION = { id: 'act_order_risk', digest: 'sha256:0000' };

/** The order used in the README; scores 40 (amount) + 25 (countries) + 20 (new customer). */
export const SAMPLE_ORDER = {
  order_id: 'ord_1001',
  amount_cents: 184900,
  currency: 'EUR',
  billing: { country: 'DE' },
  shipping: { country: 'US' },
  items: [{ sku: 'LAMP-01', quantity: 3 }, { sku: 'CABLE-7' }],
  customer: { id: 'cus_77', new: true },
};

/** The scorer's output for SAMPLE_ORDER with RISK_THRESHOLD "80", pinned byte for byte. */
export const SAMPLE_OUTPUT =
  '{"score":85,"projection":{"name":"order_risk","entity_type":"order","entity_id":"ord_1001",' +
  '"title":"Order ord_1001: risk 85/100","status":"held_for_review","data":{"threshold":80,' +
  '"threshold_source":"secret","amount_cents":184900,"item_quantity":4,' +
  '"reasons":["amount_high","country_mismatch","new_customer"]}},"derived_event":{"type":' +
  '"orders.risk_scored","payload":{"order_id":"ord_1001","score":85,"status":"held_for_review"}}}';

export function envelopeText(payloadJson: string, secrets: Record<string, unknown> = {}, space = 0): string {
  const payloadMarker = '"__payload__"';
  const text = JSON.stringify({ payload: '__payload__', secrets, permissions: PERMISSIONS, action: ACTION }, null, space);
  return text.replace(payloadMarker, payloadJson);
}

const withThreshold = (threshold: unknown): Record<string, unknown> =>
  threshold === undefined ? {} : { RISK_THRESHOLD: threshold };

/** A case whose expectation comes from the reference model over the parsed payload. */
function modelled(name: string, payload: unknown, secrets: Record<string, unknown> = {}, space = 0): RiskCase {
  return { name, envelope: envelopeText(JSON.stringify(payload, null, space), secrets, space), expected: expectedRiskOutput(payload, secrets) };
}

/** A case with hand-written payload text (escapes, duplicate keys, literal forms). */
function raw(name: string, payloadJson: string, expected: string | null, secrets: Record<string, unknown> = {}): RiskCase {
  return { name, envelope: envelopeText(payloadJson, secrets), expected };
}

const nest = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
const lowRisk = { order_id: 'ord_low', amount_cents: 1999, billing: { country: 'FR' }, shipping: { country: 'FR' } };

export function namedCases(): RiskCase[] {
  const model = (payload: unknown, secrets: Record<string, unknown> = {}): string | null => expectedRiskOutput(payload, secrets);
  return [
    { name: 'sample order, threshold 80 -> held', envelope: envelopeText(JSON.stringify(SAMPLE_ORDER), withThreshold('80')), expected: SAMPLE_OUTPUT },
    modelled('sample order, threshold absent -> default 70, held', SAMPLE_ORDER),
    modelled('sample order, threshold 90 -> approved', SAMPLE_ORDER, withThreshold('90')),
    modelled('sample order, threshold 85 -> approved (held only above)', SAMPLE_ORDER, withThreshold('85')),
    modelled('low-risk order, threshold 0 -> approved at score 0', lowRisk, withThreshold('0')),
    modelled('pretty-printed envelope', SAMPLE_ORDER, withThreshold('80'), 2),
    modelled('numeric order id', { ...SAMPLE_ORDER, order_id: 1001 }),
    modelled('numeric order id 0', { ...SAMPLE_ORDER, order_id: 0 }),
    modelled('largest numeric order id', { ...SAMPLE_ORDER, order_id: 999_999_999_999_999 }),
    modelled('order id of 64 bytes', { ...SAMPLE_ORDER, order_id: 'é'.repeat(32) }),
    modelled('order id needing escapes', { ...SAMPLE_ORDER, order_id: 'a"b\\c/\b\f\n\r\t\u0000\u001f\u007f\u2028é😀' }),
    modelled('threshold "abc" -> invalid_secret', SAMPLE_ORDER, withThreshold('abc')),
    modelled('threshold "101" -> invalid_secret', SAMPLE_ORDER, withThreshold('101')),
    modelled('threshold "0080" -> invalid_secret', SAMPLE_ORDER, withThreshold('0080')),
    modelled('threshold "" -> invalid_secret', SAMPLE_ORDER, withThreshold('')),
    modelled('threshold as a number -> invalid_secret', SAMPLE_ORDER, withThreshold(80)),
    modelled('threshold null -> invalid_secret', SAMPLE_ORDER, withThreshold(null)),
    modelled('amount tiers: 50000', { ...lowRisk, amount_cents: 50000 }),
    modelled('amount tiers: 10000', { ...lowRisk, amount_cents: 10000 }),
    modelled('amount tiers: 99999', { ...lowRisk, amount_cents: 99999 }),
    modelled('amount tiers: 9999', { ...lowRisk, amount_cents: 9999 }),
    modelled('amount tiers: 49999', { ...lowRisk, amount_cents: 49999 }),
    modelled('amount negative', { ...lowRisk, amount_cents: -500 }),
    modelled('amount missing', { order_id: 'ord_x' }),
    modelled('amount fractional', { ...lowRisk, amount_cents: 1500.5 }),
    modelled('amount as a string', { ...lowRisk, amount_cents: '150000' }),
    modelled('countries missing', { ...lowRisk, billing: {}, shipping: { country: 'FR' } }),
    modelled('country empty', { ...lowRisk, billing: { country: '' } }),
    modelled('countries differ in case only', { ...lowRisk, billing: { country: 'fr' } }),
    modelled('billing not an object', { ...lowRisk, billing: 'FR' }),
    modelled('6 items -> several_items', { ...lowRisk, items: [{ quantity: 6 }] }),
    modelled('5 items -> no item points', { ...lowRisk, items: [{ quantity: 5 }] }),
    modelled('10 items -> several_items (many only above 10)', { ...lowRisk, items: [{ quantity: 10 }] }),
    modelled('11 items -> many_items', { ...lowRisk, items: [{ quantity: 10 }, {}] }),
    modelled('odd quantities count 1 each, big ones capped', {
      ...lowRisk,
      items: [{ quantity: 0 }, { quantity: -3 }, { quantity: '4' }, { quantity: 2.5 }, 7, [], null, { quantity: 5000 }],
    }),
    modelled('items not an array', { ...lowRisk, items: { quantity: 50 } }),
    modelled('customer.new "true" is not new', { ...lowRisk, customer: { new: 'true' } }),
    modelled('customer not an object', { ...lowRisk, customer: true }),
    modelled('every signal -> score 100', {
      order_id: 'ord_max', amount_cents: 100000, billing: { country: 'DE' }, shipping: { country: 'BR' }, items: [{ quantity: 20 }], customer: { new: true },
    }, withThreshold('100')),
    raw('escaped key names and values', '{"order\\u005fid":"ord\\u005f\\u00e9\\ud83d\\ude00","amount_cents":1}',
      model({ order_id: 'ord_é😀', amount_cents: 1 })),
    raw('escaped duplicate key: the last spelling wins', '{"order_id":"plain","order\\u005fid":"escaped","amount_cents":1}',
      model({ order_id: 'escaped', amount_cents: 1 })),
    raw('look-alike non-ASCII keys are other keys', '{"order_ïd":"x","order_id":"real","ordér_id":"y","order_\\u0456d":"z"}',
      model({ order_id: 'real' })),
    raw('non-ASCII key of the same length does not match', '{"order_ïd":"only"}', null),
    raw('duplicate keys: the last wins', '{"order_id":"first","amount_cents":120000,"order_id":"second","amount_cents":5}',
      model({ order_id: 'second', amount_cents: 5 })),
    raw('whitespace everywhere', ' {\n\t"order_id" :\r\n "ord_ws" , "items" : [ { "quantity" : 7 } ] } ',
      model({ order_id: 'ord_ws', items: [{ quantity: 7 }] })),
    raw('amount 1e5 is not an integer literal', '{"order_id":"o","amount_cents":1e5}', model({ order_id: 'o', amount_cents: 'n/a' })),
    raw('amount 100000.0 is not an integer literal', '{"order_id":"o","amount_cents":100000.0}', model({ order_id: 'o', amount_cents: 'n/a' })),
    raw('amount past i64 is not an integer', '{"order_id":"o","amount_cents":9223372036854775808}', model({ order_id: 'o', amount_cents: 'n/a' })),
    // The host refuses an output number beyond ±(2^53 - 1) (invalid_action_output): larger amounts count as absent.
    raw('amount i64 max is past 2^53: absent', '{"order_id":"o","amount_cents":9223372036854775807}', model({ order_id: 'o', amount_cents: 'n/a' })),
    raw('amount i64 min is past -2^53: absent', '{"order_id":"o","amount_cents":-9223372036854775808}', model({ order_id: 'o', amount_cents: 'n/a' })),
    raw('amount 2^53 is absent', '{"order_id":"o","amount_cents":9007199254740992}', model({ order_id: 'o', amount_cents: 'n/a' })),
    raw('amount -2^53 is absent', '{"order_id":"o","amount_cents":-9007199254740992}', model({ order_id: 'o', amount_cents: 'n/a' })),
    raw('amount 2^53 - 1 counts', '{"order_id":"o","amount_cents":9007199254740991}', model({ order_id: 'o', amount_cents: 9007199254740991 })),
    raw('amount -(2^53 - 1) counts', '{"order_id":"o","amount_cents":-9007199254740991}', model({ order_id: 'o', amount_cents: -9007199254740991 })),
    raw('amount -0', '{"order_id":"o","amount_cents":-0}', model({ order_id: 'o', amount_cents: 0 })),
    raw('quantity i64 max is capped at 1000', '{"order_id":"o","items":[{"quantity":9223372036854775807}]}', model({ order_id: 'o', items: [{ quantity: 1000 }] })),
    raw('quantity past i64 adds 1', '{"order_id":"o","items":[{"quantity":99999999999999999999}]}', model({ order_id: 'o', items: [{ quantity: 'n/a' }] })),
    // A payload of 128 levels (the most Sluice stores) is 129 with the envelope around it.
    raw('a payload nested 128 levels (129 in the envelope) is accepted', `{"order_id":"deep","x":${nest(127)}}`, model({ order_id: 'deep' })),
    raw('nesting past the depth limit is rejected', `{"order_id":"deep","x":${nest(128)}}`, null),
    raw('missing order id -> rejected', '{"amount_cents":184900}', null),
    raw('null order id -> rejected', '{"order_id":null}', null),
    raw('empty order id -> rejected', '{"order_id":""}', null),
    raw('order id "." -> rejected (no entity_id the host takes)', '{"order_id":"."}', null),
    raw('order id ".." -> rejected, also written escaped', '{"order_id":"\\u002e."}', null),
    raw('order id "..." is an id like any other', '{"order_id":"..."}', model({ order_id: '...' })),
    raw('65-byte order id -> rejected', JSON.stringify({ order_id: 'x'.repeat(65) }), null),
    raw('fractional order id -> rejected', '{"order_id":12.5}', null),
    raw('negative order id -> rejected', '{"order_id":-7}', null),
    raw('16-digit order id -> rejected', '{"order_id":1000000000000000}', null),
    raw('object order id -> rejected', '{"order_id":{"id":"ord"}}', null),
    raw('payload not an object -> rejected', '[{"order_id":"ord_1"}]', null),
    raw('payload null -> rejected', 'null', null),
    raw('lone surrogate escape -> rejected', '{"order_id":"\\ud800"}', null),
    { name: 'envelope is not JSON -> rejected', envelope: '{"payload":', expected: null },
    { name: 'envelope is not an object -> rejected', envelope: '[]', expected: null },
    { name: 'envelope without payload -> rejected', envelope: '{"secrets":{}}', expected: null },
    { name: 'envelope with trailing garbage -> rejected', envelope: `${envelopeText('{"order_id":"o"}')}x`, expected: null },
    {
      name: 'envelope without secrets -> default threshold',
      envelope: `{"payload":${JSON.stringify(SAMPLE_ORDER)}}`,
      expected: model(SAMPLE_ORDER),
    },
  ];
}

/** mulberry32: a small seeded PRNG, so the random cases are the same on every run. */
function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ID_CHARS = ['a', 'Z', '0', '_', '-', ' ', '"', '\\', '/', '\n', '\u0001', '\u007f', 'é', '€', '😀', '\u2028'];
const AMOUNTS = [0, 1, 9999, 10000, 49999, 50000, 99999, 100000, 2_500_000, -1, 12.75, '100', null];
const COUNTRIES = ['DE', 'US', 'FR', 'de', '', null, 7];
const QUANTITIES = [1, 2, 3, 5, 6, 0, -1, 1001, '3', 2.5, null];
const THRESHOLDS = [undefined, '0', '40', '70', '85', '100', '101', 'x', 60, null];

/** `count` random orders (with some fields left out) and thresholds. */
export function randomCases(count: number, seed = 20240605): RiskCase[] {
  const random = createRandom(seed);
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)] as T;
  const maybe = (probability: number): boolean => random() < probability;
  const cases: RiskCase[] = [];
  for (let i = 0; i < count; i++) {
    const order: Record<string, unknown> = {};
    if (maybe(0.95)) {
      order['order_id'] = maybe(0.2)
        ? Math.floor(random() * 1e9)
        : Array.from({ length: 1 + Math.floor(random() * 20) }, () => pick(ID_CHARS)).join('');
    }
    if (maybe(0.9)) order['amount_cents'] = pick(AMOUNTS);
    if (maybe(0.85)) order['billing'] = { country: pick(COUNTRIES) };
    if (maybe(0.85)) order['shipping'] = { country: pick(COUNTRIES) };
    if (maybe(0.8)) {
      order['items'] = Array.from({ length: Math.floor(random() * 5) }, () => (maybe(0.8) ? { sku: `S${i}`, quantity: pick(QUANTITIES) } : {}));
    }
    if (maybe(0.7)) order['customer'] = { new: pick([true, false, 'true', 1]) };
    cases.push(modelled(`random order #${i}`, order, withThreshold(pick(THRESHOLDS)), i % 3));
  }
  return cases;
}

/**
 * Random orders carrying `padBytes` of extra data the scorer ignores (a long memo and a nested
 * list), large enough that the kits' skip index matters.
 */
export function paddedCases(count: number, padBytes: number, seed = 4242): RiskCase[] {
  return randomCases(count, seed).map((riskCase, i) => {
    const payload: unknown = JSON.parse(riskCase.envelope).payload;
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return riskCase;
    const padded = {
      memo: 'm'.repeat(padBytes / 2),
      ...payload,
      history: Array.from({ length: padBytes / 40 }, (_, n) => ({ at: n, note: ['x'] })),
    };
    const secrets: unknown = JSON.parse(riskCase.envelope).secrets;
    const secretRecord = typeof secrets === 'object' && secrets !== null ? (secrets as Record<string, unknown>) : {};
    return modelled(`padded order #${i}`, padded, secretRecord);
  });
}
