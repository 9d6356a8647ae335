// An https:// or wss:// url whose server speaks plain HTTP (as Sluice does, unless TLS is put in
// front of it) fails in the TLS handshake in words that do not say so: the server waits for a
// request line that never comes (a connect or open timeout), closes on the TLS hello ("disconnected
// before secure TLS connection"), or answers it in HTTP (OpenSSL's "wrong version number"). Such
// a failure gets a hint naming the likely cause.

/** The server answered the TLS hello in HTTP: it does not speak TLS. */
const ANSWERED_IN_HTTP = /ERR_SSL_WRONG_VERSION_NUMBER|wrong version number/i;
/**
 * The server closed on the hello (Sluice's uWS does, after its idle timeout), or gave it no answer
 * in time: also what a TLS server restarting or overloaded, or one out of reach, does.
 */
const CLOSED_OR_SILENT = /before secure TLS connection|UND_ERR_CONNECT_TIMEOUT|Connect Timeout/i;

const isSecure = (url: URL): boolean => url.protocol === 'https:' || url.protocol === 'wss:';

/** Whether `failure` (at an https:// or wss:// url) says the server answered the TLS hello as no TLS server would: trying again cannot help. */
export const answeredWithoutTls = (url: URL, failure: string): boolean => isSecure(url) && ANSWERED_IN_HTTP.test(failure);

/**
 * A sentence to add to `failure` (what the connection failed with; `timedOut`: the opening had no
 * answer in time) when `url` is https:// or wss:// and the failure reads as a TLS handshake with a
 * plain-HTTP server; '' otherwise.
 */
export function plainHttpHint(url: URL, failure: string, timedOut = false): string {
  if (!isSecure(url)) return '';
  if (!timedOut && !CLOSED_OR_SILENT.test(failure) && !ANSWERED_IN_HTTP.test(failure)) return '';
  const plain = url.protocol === 'https:' ? 'http' : 'ws';
  return `if the server speaks plain HTTP (Sluice does unless TLS is put in front of it), use ${plain}:// instead of ${url.protocol}//`;
}
