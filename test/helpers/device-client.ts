// A real WebSocket client (the `ws` package) acting as a device: it opens /devices/:org/:name with a
// token, collects Sluice's JSON answer frames and the close code, and waits on conditions with a deadline.

import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';

export interface DeviceFrame {
  readonly type: 'ready' | 'ack' | 'nack';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read the frames' fields freely
  readonly [field: string]: any;
}

export interface DeviceClient {
  readonly socket: WebSocket;
  readonly frames: DeviceFrame[];
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Sends a message frame (an object is serialized; a string or Buffer goes as it is). */
  send(message: unknown, options?: { binary?: boolean }): void;
  /** Sends text frames in one socket write (so the server reads them together); resolves once written. */
  sendAtOnce(frames: readonly string[]): Promise<void>;
  /** The answer frame (ack or nack) naming message `id`, once it arrives. */
  answerTo(id: string | null, timeoutMs?: number): Promise<DeviceFrame>;
  waitFor(predicate: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  close(code?: number): void;
}

/** One client-to-server text frame (RFC 6455: FIN, opcode 1, masked) of under 64 KiB. */
function maskedTextFrame(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  const head = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  const mask = randomBytes(4);
  return Buffer.concat([head, mask, payload.map((byte, i) => byte ^ mask[i % 4]!)]);
}

/** Opens a device socket; resolves once Sluice sent `ready` (the connection is recorded), or rejects with the refusal's status (or the close that came instead of `ready`: `closedWith`). */
export function connectDevice(baseUrl: string, orgId: string, name: string, token: string | undefined, options: { protocols?: string[]; extraQuery?: string } = {}): Promise<DeviceClient> {
  const tokenQuery = token === undefined || options.protocols !== undefined ? '' : `token=${encodeURIComponent(token)}`;
  const query = [tokenQuery, options.extraQuery ?? ''].filter((part) => part !== '').join('&').replace(/^(?=.)/, '?');
  const socket = new WebSocket(`${baseUrl.replace('http', 'ws')}/devices/${orgId}/${name}${query}`, options.protocols ?? []);
  const frames: DeviceFrame[] = [];
  socket.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as DeviceFrame));
  let closedWith: { code: number; reason: string } | undefined;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.on('close', (code, reason) => resolve((closedWith = { code, reason: reason.toString() }))));
  const waitFor = async (predicate: () => boolean, what: string, timeoutMs = 5000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const client: DeviceClient = {
    socket,
    frames,
    closed,
    send: (message, { binary = false } = {}) => socket.send(typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message), { binary }),
    sendAtOnce: (texts) => {
      // Written under ws, on its TCP socket: one write carries every frame.
      const raw = (socket as unknown as { _socket: import('node:net').Socket })._socket;
      return new Promise((resolve, reject) => raw.write(Buffer.concat(texts.map(maskedTextFrame)), (error) => (error ? reject(error) : resolve())));
    },
    answerTo: async (id, timeoutMs) => {
      const find = (): DeviceFrame | undefined => frames.find((f) => f.type !== 'ready' && f.id === id);
      await waitFor(() => find() !== undefined, `the answer to ${String(id)}`, timeoutMs);
      return find() as DeviceFrame;
    },
    waitFor,
    close: (code = 1000) => socket.close(code),
  };
  return new Promise((resolve, reject) => {
    socket.on('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      response.on('end', () => reject(Object.assign(new Error(`refused with ${response.statusCode}: ${text}`), { status: response.statusCode, body: text, retryAfter: response.headers['retry-after'] })));
    });
    socket.on('error', reject);
    const ready = (): boolean => frames.some((f) => f.type === 'ready');
    socket.on('open', () =>
      void waitFor(() => ready() || closedWith !== undefined, 'the ready frame').then(() => {
        if (ready()) resolve(client);
        else reject(Object.assign(new Error(`closed before ready with ${closedWith?.code}: ${closedWith?.reason}`), { closedWith }));
      }, reject));
  });
}
