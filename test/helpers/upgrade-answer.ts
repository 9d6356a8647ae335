// The HTTP answer to a WebSocket handshake that is refused: its status, Retry-After and error code
// (a raw request, so the refusal's headers and body can be read; an accepted upgrade rejects).

import { randomBytes } from 'node:crypto';
import { get } from 'node:http';

export interface UpgradeRefusal {
  readonly status: number | undefined;
  readonly retryAfter: string | undefined;
  readonly code: string;
  readonly message: string;
}

/**
 * `protocols`: the Sec-WebSocket-Protocol entries to offer, if any: one header line, or (`oneLineEach`)
 * a line per entry, as a client or proxy may send a list header; `extraHeaders` are sent too.
 */
export function upgradeAnswer(url: string, protocols: readonly string[] = [], oneLineEach = false, extraHeaders: Readonly<Record<string, string>> = {}): Promise<UpgradeRefusal> {
  const headers = {
    ...extraHeaders,
    connection: 'Upgrade',
    upgrade: 'websocket',
    'sec-websocket-version': '13',
    'sec-websocket-key': randomBytes(16).toString('base64'),
    ...(protocols.length === 0 ? {} : { 'sec-websocket-protocol': oneLineEach ? [...protocols] : protocols.join(', ') }),
  };
  return new Promise((resolve, reject) => {
    const request = get(url, { headers }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      response.on('end', () => {
        const { code, message } = (JSON.parse(text) as { error: { code: string; message: string } }).error;
        resolve({ status: response.statusCode, retryAfter: response.headers['retry-after'], code, message });
      });
    });
    request.on('upgrade', (_response, socket) => {
      socket.destroy();
      reject(new Error('the upgrade was accepted'));
    });
    request.on('error', reject);
  });
}
