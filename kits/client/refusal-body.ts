// What the client shows of a refusal's body: Sluice's JSON error (code and message), or, for any
// other body, its size only. A proxy's login or error page may hold anything (a session id), and
// what the client shows ends up in logs and terminals.

/** Sluice's error object in `text` ({"error": {"code": "snake_case", "message", ...}}), or undefined for anything else. */
export function sluiceErrorIn(text: string): Record<string, unknown> | undefined {
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    // Another JSON error (a gateway's {"error": {"code": 403, "message": ...}}) is not Sluice's.
    const error = parsed !== null && typeof parsed === 'object' ? parsed.error : undefined;
    if (error !== null && typeof error === 'object' && !Array.isArray(error) && typeof (error as { code?: unknown }).code === 'string') return error as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return undefined;
}

/** "no body", a body's size (not shown), or Sluice's error as `code: message`. */
export function describeRefusalBody(text: string): string {
  const error = sluiceErrorIn(text);
  if (error !== undefined) return typeof error['message'] === 'string' ? `${String(error['code'])}: ${error['message']}` : String(error['code']);
  return text === '' ? 'no body' : `a body of ${Buffer.byteLength(text)} bytes that is not Sluice's JSON error (not shown)`;
}

/**
 * What a refused WebSocket handshake said (its status and body, as describeRefusalBody), and, when
 * it answered with a success or a redirect (a WebSocket endpoint answers 101; a web page, a health
 * check or a proxy's login 200 or 30x), that the url is likely not Sluice's.
 */
export function describeHandshakeRefusal(status: number, body: string): string {
  const said = describeRefusalBody(body);
  return status < 400 ? `${said}; a WebSocket endpoint answers 101: is the url where Sluice listens?` : said;
}
