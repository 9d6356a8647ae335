// The outbound target of a webhook step: its URL and the extra headers the author may add.
// Headers that frame the request or carry Sluice's signature and idempotency key are refused.

import { shownName } from '../validation/shown-name.ts';
import { PROTO_KEY } from '../validation/proto-key.ts';
import { describeField, expectRecord, fail, pathOf, readString } from './input-fields.ts';

export const MAX_URL_LENGTH = 2048;
export const MAX_HEADERS = 20;
export const MAX_HEADER_VALUE = 1024;

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) and framing headers are the transport's; the body is always
 * plain JSON, so its content headers are Sluice's; the Standard Webhooks headers and
 * `Idempotency-Key` are what receivers verify and dedupe on, and `sluice-fence` / `sluice-attempt`
 * name the claim that sent a request (a step's own value would be replaced). A step may never set them.
 */
export const FORBIDDEN_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  // Makes Node send the headers at once, before the signature can be added: the send would throw.
  'expect',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
  'idempotency-key',
  'sluice-fence',
  'sluice-attempt',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/** What a header value can carry as is: Node refuses more when it sends, long after the workflow was saved. */
const HEADER_VALUE = /^[\x20-\x7e]*$/;

/**
 * Absolute http(s) URL without credentials. Address checks (loopback, private ranges) belong to
 * the sender at delivery time, when DNS is resolved; a write-time check could be bypassed by DNS.
 */
export function parseWebhookUrl(value: unknown, field: string): string {
  const text = readString(value, field, { max: MAX_URL_LENGTH, trim: true });
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail(field, `${describeField(field)} must be an absolute http or https URL.`, 'invalid_url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    fail(field, `${describeField(field)} must use http or https, not ${url.protocol.replace(':', '')}.`, 'invalid_url');
  }
  if (url.hostname === '') fail(field, `${describeField(field)} must name a host.`, 'invalid_url');
  const nameProblem = dnsNameProblem(url.hostname);
  if (nameProblem !== undefined) fail(field, `${describeField(field)} names a host no resolver can look up: ${nameProblem}.`, 'invalid_url');
  // Node sends to port 0 as if no port were given (80 or 443): the step would call another address than the one it shows.
  if (url.port === '0') fail(field, `${describeField(field)} must not use port 0.`, 'invalid_url');
  if (url.username !== '' || url.password !== '') {
    fail(field, `${describeField(field)} must not embed credentials; put them in a header.`, 'invalid_url');
  }
  // Percent-encoding can make a URL nine times longer than it was sent (each "中" is "%E4%B8%AD"): the cap is on what is stored and sent.
  const normalized = url.toString();
  if (normalized.length > MAX_URL_LENGTH) {
    fail(field, `${describeField(field)} must be at most ${MAX_URL_LENGTH} characters once percent-encoded; this one is ${normalized.length}.`, 'invalid_url');
  }
  return normalized;
}

/**
 * Why a host name (as the URL parser leaves it: lowercase, punycode) can never resolve: an empty
 * label (`a..b`), a label past 63 characters or a name past 253 (RFC 1035). Such a step would only
 * fail at every delivery, retrying for hours. An IPv6 literal passes; an IPv4 one is short labels.
 */
function dnsNameProblem(hostname: string): string | undefined {
  if (hostname.startsWith('[')) return undefined;
  // One trailing dot names the root, as in `example.com.`.
  const name = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (name.length > 253) return `it is ${name.length} characters long, and a name may have at most 253`;
  const labels = name.split('.');
  if (labels.some((label) => label === '')) return 'it has an empty label (two dots in a row, or a leading dot)';
  const long = labels.find((label) => label.length > 63);
  if (long !== undefined) return `its label "${long.slice(0, 20)}…" is ${long.length} characters long, and a label may have at most 63`;
  return undefined;
}

/** String-to-string map, at most 20 entries, valid header names, no duplicates by case. */
export function parseWebhookHeaders(value: unknown, field: string): Record<string, string> {
  const record = expectRecord(value, field);
  const entries = Object.entries(record);
  if (entries.length > MAX_HEADERS) fail(field, `${describeField(field)} may hold at most ${MAX_HEADERS} headers.`);
  const seen = new Set<string>();
  const headers: Record<string, string> = {};
  for (const [name, raw] of entries) {
    const at = pathOf(field, shownName(name));
    if (!TOKEN.test(name)) fail(at, `Header name "${shownName(name)}" is not a valid HTTP header name.`);
    if (name === PROTO_KEY) fail(at, `Header name "${PROTO_KEY}" cannot be stored.`);
    const lower = name.toLowerCase();
    if (FORBIDDEN_HEADERS.has(lower)) {
      fail(at, `Header "${name}" is set by Sluice or by the transport and cannot be overridden.`, 'forbidden_header');
    }
    if (seen.has(lower)) fail(at, `Header "${name}" is given more than once (header names ignore case).`);
    seen.add(lower);
    const headerValue = readString(raw, at, { min: 0, max: MAX_HEADER_VALUE });
    if (!HEADER_VALUE.test(headerValue)) fail(at, `Header "${name}" may hold only printable ASCII and spaces.`);
    headers[name] = headerValue;
  }
  return headers;
}
