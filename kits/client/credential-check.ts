// The API key or device token rides as an entry of Sec-WebSocket-Protocol (so it stays out of
// access logs), and a subprotocol may hold only HTTP token characters; REST calls carry the key in
// the Authorization header. A credential read from a file with its trailing newline would fail deep
// inside `ws` or fetch (and fetch's error quotes the header, key and all); this names the problem instead.

/** The characters RFC 7230 allows in a token, as `ws` checks each subprotocol. */
const TOKEN = /^[!#$%&'*+\-.0-9A-Z^_`|a-z~]+$/;

/** Visible ASCII: what a credential in an HTTP header may hold here (no spaces, no line breaks). */
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/** Names the first character of `value` that `allowed` refuses and its position, never the value. */
export function problemWith(what: string, value: string, allowed: RegExp, rule: string): string | undefined {
  if (allowed.test(value)) return undefined;
  if (value === '') return `${what} is empty.`;
  const at = [...value].findIndex((char) => !allowed.test(char));
  const char = [...value][at] ?? '';
  const code = `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
  const hint = allowed.test(value.trim()) ? ' (white space around it, such as the newline ending a file: trim it)' : '';
  return `${what} holds ${code} at position ${at}${hint}: ${rule}`;
}

/**
 * Why `value` cannot be sent as a subprotocol, as a sentence naming `what` ("the API key"), or
 * undefined when it can. It names the offending character and its position, never the value.
 */
export function credentialProblem(what: string, value: string): string | undefined {
  return problemWith(what, value, TOKEN, "it is sent as a WebSocket subprotocol, which allows only letters, digits and !#$%&'*+-.^_`|~.");
}

/** As credentialProblem, for a credential sent in a URL's `token` parameter (one that cannot be a subprotocol). */
export function queryCredentialProblem(what: string, value: string): string | undefined {
  return problemWith(what, value, VISIBLE_ASCII, "it is sent in the URL's token parameter, which takes visible ASCII characters only (no spaces or line breaks).");
}

/** As credentialProblem, for a credential sent in the Authorization header (REST calls). */
export function headerCredentialProblem(what: string, value: string): string | undefined {
  return headerValueProblem(what, value, 'Authorization');
}

/** As credentialProblem, for a value sent in the header `header`: visible ASCII only. */
export function headerValueProblem(what: string, value: string, header: string): string | undefined {
  return problemWith(what, value, VISIBLE_ASCII, `it is sent in the ${header} header, which takes visible ASCII characters only (no spaces or line breaks).`);
}

/** `value` without the white space and line breaks at its ends, as fetch sends a header value. */
export const withoutEndSpace = (value: string): string => value.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');

/** A credential option that must be given: throws TypeError when it is not a string at all (an unset variable). */
export function givenCredential(what: string, option: string, value: unknown): string {
  if (typeof value !== 'string') throw new TypeError(`${what} is missing (${option}).`);
  return value;
}

/**
 * A credential option as it is sent: white space at its ends (a key file's last newline) is not part
 * of it and is dropped. Throws TypeError when the option is not given (givenCredential).
 */
export const credentialAsSent = (what: string, option: string, value: unknown): string => withoutEndSpace(givenCredential(what, option, value));
