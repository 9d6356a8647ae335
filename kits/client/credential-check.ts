// The API key or device token rides as an entry of Sec-WebSocket-Protocol (so it stays out of
// access logs), and a subprotocol may hold only HTTP token characters. A credential read from a
// file with its trailing newline would fail deep inside `ws`; this names the problem instead.

/** The characters RFC 7230 allows in a token, as `ws` checks each subprotocol. */
const TOKEN = /^[!#$%&'*+\-.0-9A-Z^_`|a-z~]+$/;

/**
 * Why `value` cannot be sent as a subprotocol, as a sentence naming `what` ("the API key"), or
 * undefined when it can. It names the offending character and its position, never the value.
 */
export function credentialProblem(what: string, value: string): string | undefined {
  if (TOKEN.test(value)) return undefined;
  if (value === '') return `${what} is empty.`;
  const at = [...value].findIndex((char) => !TOKEN.test(char));
  const char = [...value][at] ?? '';
  const code = `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
  const hint = TOKEN.test(value.trim()) ? ' (white space around it, such as the newline ending a file: trim it)' : '';
  return `${what} holds ${code} at position ${at}${hint}: it is sent as a WebSocket subprotocol, which allows only letters, digits and !#$%&'*+-.^_\`|~.`;
}
