// An https:// or wss:// url whose server speaks plain HTTP (as Sluice does, unless TLS is put in
// front of it) fails in the TLS handshake in words that do not say so: the server waits for a
// request line that never comes (a connect or open timeout), closes on the TLS hello ("disconnected
// before secure TLS connection"), or answers it in HTTP (OpenSSL's "wrong version number"). Such
// a failure gets a hint naming the likely cause.

/** The server closed on the TLS hello, or answered it in HTTP: it does not speak TLS. */
const NOT_TLS = /ERR_SSL_WRONG_VERSION_NUMBER|wrong version number|before secure TLS connection/i;
/** The handshake had no answer in time: a server that ignores the hello, or one that cannot be reached. */
const CONNECT_TIMEOUT = /UND_ERR_CONNECT_TIMEOUT|Connect Timeout/i;

/** Whether `failure` (at an https:// or wss:// url) says the server answered the TLS hello as no TLS server would: trying again cannot help. */
export const answeredWithoutTls = (url: URL, failure: string): boolean => (url.protocol === 'https:' || url.protocol === 'wss:') && NOT_TLS.test(failure);

/**
 * A sentence to add to `failure` (what the connection failed with; `timedOut`: the opening had no
 * answer in time) when `url` is https:// or wss:// and the failure reads as a TLS handshake with a
 * plain-HTTP server; '' otherwise.
 */
export function plainHttpHint(url: URL, failure: string, timedOut = false): string {
  if (url.protocol !== 'https:' && url.protocol !== 'wss:') return '';
  if (!timedOut && !CONNECT_TIMEOUT.test(failure) && !NOT_TLS.test(failure)) return '';
  const plain = url.protocol === 'https:' ? 'http' : 'ws';
  return `if the server speaks plain HTTP (Sluice does unless TLS is put in front of it), use ${plain}:// instead of ${url.protocol}//`;
}
