// `sluice device`: acts as a device from a terminal. It opens a device socket with the device's
// token, sends each `--send` message (or each line of stdin), its id put first (device-line.ts)
// and paced by device-pacer.ts, prints Sluice's `ready` and each message's last answer as one JSON
// line, and ends once each message has it: exit 0 if all were acked.

import type { Readable, Writable } from 'node:stream';
import { createInterface, type Interface } from 'node:readline';
import { parseCommandArgs } from './cli-parse-args.ts';
import { credentialProblem } from '../kits/client/credential-check.ts';
import { DEVICE_SILENCE_MS } from '../kits/client/device-connection.ts';
import { backoffMs, realSleep, RETRIED_STATUSES, type Sleep } from '../kits/client/retry.ts';
import { runSocket } from '../kits/client/socket-run.ts';
import { credentialOf } from './cli-credential.ts';
import { idFirst } from './device-line.ts';
import { DevicePacer, type DeviceAnswer } from './device-pacer.ts';
import { InputError } from './errors.ts';
import { printable, printableJson } from './terminal-text.ts';
import { shownName } from './validation/shown-name.ts';
import { describeHandshakeRefusal } from '../kits/client/refusal-body.ts';
import { frameIdOf, MAX_DEVICE_MESSAGE_BYTES, MAX_MESSAGES_IN_FLIGHT, nackFrame } from './triggers/device-frame.ts';
import { DEVICE_PROTOCOL } from './triggers/device-upgrade.ts';
import { shownUrl } from './shown-url.ts';

const USAGE = 'usage: sluice device <ws://host:port/devices/<org>/<device>> [--token <device token>, or SLUICE_DEVICE_TOKEN] [--send <json>]... (without --send: one message per stdin line)';

export interface DeviceCommandIo {
  readonly stdin: Readable;
  readonly stdout: Writable;
  /**
   * Hears each retryable nack, whose message is sent again, and why the socket ended otherwise than
   * with a clean close (refused, unreachable, closed with a code): stdout stays `ready` and answers.
   */
  readonly stderr: Writable;
  /** Where SLUICE_DEVICE_TOKEN is read when --token is not given. */
  readonly env?: NodeJS.ProcessEnv;
  /** Waits out a retryable nack (default: a timer that does not hold the process open by itself). */
  readonly sleep?: Sleep;
}

/** Connects tried again after a refusal that passes (429, 503), each after its Retry-After or a longer backoff (retry.ts): 16–32 s in all without one. */
const CONNECT_RETRIES = 7;

const unrefSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());

/** A frame Sluice sent, or undefined for one that is not a JSON object (printed, never counted). */
function parseFrame(text: string): DeviceAnswer | undefined {
  try {
    const frame = JSON.parse(text) as unknown;
    return typeof frame === 'object' && frame !== null && typeof (frame as { type?: unknown }).type === 'string' ? (frame as DeviceAnswer) : undefined;
  } catch {
    return undefined;
  }
}

/** Runs the command; resolves with the exit code (0: every message acked). */
export async function deviceCommand(args: readonly string[], io: DeviceCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { token: { type: 'string' }, send: { type: 'string', multiple: true } },
  });
  const url = positionals[0];
  if (positionals.length !== 1 || url === undefined) throw new InputError(400, 'usage', USAGE);
  // The device's `socket_path` goes under the socket's scheme, not the API's http:// one.
  if (!/^wss?:\/\//i.test(url)) throw new InputError(400, 'usage', `The device socket URL starts with ws:// or wss:// (got ${JSON.stringify(shownName(shownUrl(url)))}). ${USAGE}`);
  // An empty --token is refused below ("The device token is empty."), as `watch` refuses an empty
  // --key: not replaced by SLUICE_DEVICE_TOKEN, which the flag was given to override.
  const token = credentialOf(values.token, io.env ?? {}, 'SLUICE_DEVICE_TOKEN');
  if (token === undefined) throw new InputError(400, 'usage', `A device token is required: --token, or SLUICE_DEVICE_TOKEN. ${USAGE}`);
  const problem = credentialProblem('The device token', token);
  if (problem !== undefined) throw new InputError(400, 'usage', problem);
  // Each --send is one message: a blank one (an unset shell variable) would send nothing and exit 0,
  // as if every message had been acked. Blank stdin lines are skipped instead (a trailing newline).
  if (values.send?.some((message) => message.trim() === '') === true) throw new InputError(400, 'usage', '--send is empty: give it the message to send.');
  const print = (line: string): void => void io.stdout.write(`${line}\n`);
  const notice = (line: string): void => void io.stderr.write(`sluice device: ${line}\n`);
  const sleep = io.sleep ?? unrefSleep;
  let failed = false;
  let sending = true;
  let lines: Interface | undefined;
  let linesPaused = false;
  let socketEnded = false;
  const pacer = new DevicePacer({
    cap: MAX_MESSAGES_IN_FLIGHT,
    send: (text) => {
      if (socket.readyState === socket.OPEN) socket.send(text);
    },
    sleep,
    onProgress: () => {
      // Lines are read only as fast as they are sent (readline may still hand over the rest of
      // a chunk it has read after pause(), so the queue is bounded by the cap plus one chunk).
      if (lines !== undefined && linesPaused !== pacer.queued >= MAX_MESSAGES_IN_FLIGHT) {
        linesPaused = !linesPaused;
        if (linesPaused) lines.pause();
        else lines.resume();
      }
      maybeEnd();
    },
  });
  const maybeEnd = (): void => {
    if (!sending && pacer.settled && socket.readyState === socket.OPEN) socket.close(1000);
  };
  let added = 0;
  const add = (text: string): void => {
    const typed = text.trim();
    if (typed === '') return;
    added += 1;
    const line = idFirst(typed);
    // Sent, a frame past twice the cap would end the socket (and every message after it) with 1006.
    const bytes = Buffer.byteLength(line);
    if (bytes > MAX_DEVICE_MESSAGE_BYTES) {
      print(printableJson(nackFrame(frameIdOf(Buffer.from(line), false), new InputError(413, 'frame_too_large', `A device message is at most ${MAX_DEVICE_MESSAGE_BYTES} bytes; this one is ${bytes}, so sluice device did not send it.`))));
      failed = true;
      return;
    }
    pacer.add(line);
  };
  const doneSending = (): void => {
    sending = false;
    maybeEnd();
  };
  let readied = false;
  const onFrame = (data: Buffer): void => {
    // Frames are JSON, and a refusal may quote a payload's or a schema's names: printed escaped, still JSON.
    const text = printableJson(data.toString('utf8'));
    const frame = parseFrame(text);
    // stdout keeps to Sluice's frames: anything else is told on stderr, and the exit is 1.
    if (frame === undefined) {
      notice(`a frame that is not one of Sluice's (a JSON object with a type) came (ignored; is ${printable(shownUrl(url))} a Sluice device endpoint?): ${truncated(text)}`);
      failed = true;
      return;
    }
    // One `ready` per connection: sent again, the messages would go out twice.
    if (frame.type === 'ready' && readied) {
      notice(`a second ready frame came on one connection (ignored: nothing is sent again): ${truncated(text)}`);
      failed = true;
      return;
    }
    if (frame.type === 'ready') {
      readied = true;
      print(text);
      if (values.send !== undefined) {
        for (const message of values.send) add(message);
        doneSending();
        return;
      }
      lines = createInterface({ input: io.stdin });
      lines.on('line', add);
      lines.on('close', () => {
        // Closed here because the socket ended: said below, with how far it was read.
        if (socketEnded) return;
        // An empty pipe (`echo "$UNSET" | sluice device …`) sent nothing: not a success.
        if (added === 0) {
          notice('stdin held no message (only blank lines or none): nothing was sent');
          failed = true;
        }
        doneSending();
      });
      return;
    }
    const outcome = pacer.answer(frame);
    if (outcome?.kind === 'retry') {
      notice(`${text}; sending it again in ${outcome.waitMs} ms`);
      return;
    }
    print(text);
    if (outcome?.kind === 'final' && !outcome.acked) failed = true;
  };
  // The token rides as a subprotocol entry, not in the URL, so it stays out of access logs.
  const open = (): ReturnType<typeof runSocket> => runSocket(new URL(url), [DEVICE_PROTOCOL, token], onFrame, DEVICE_SILENCE_MS);
  let { socket, ended } = open();
  let end = await ended;
  // Refused before it opened for what passes (the org's quota of connects, Sluice starting): nothing
  // was sent yet, so the socket is opened again after a backoff, a few times.
  let attempt = 0;
  for (; end.kind === 'refused' && RETRIED_STATUSES.has(end.status) && attempt < CONNECT_RETRIES; attempt += 1) {
    const waitMs = backoffMs(attempt, end.retryAfterMs);
    notice(`${refusalText(end)}; connecting again in ${waitMs} ms`);
    // A timer that holds the process open: no socket does meanwhile (with unrefSleep it ended, exit 0, nothing sent).
    await (io.sleep ?? realSleep)(waitMs);
    ({ socket, ended } = open());
    end = await ended;
  }
  socketEnded = true;
  const stdinCut = sending && lines !== undefined;
  // Ended early (a dropped socket): stdin is no longer read, so it cannot hold the process open.
  lines?.close();
  // What a refusing server or a close said: whatever answered, it never drives the terminal.
  if (end.kind === 'refused') notice(`${refusalText(end)}${attempt === CONNECT_RETRIES ? ` (the ${attempt + 1}th try: not tried again)` : ''}`);
  if (end.kind === 'unreachable') notice(`could not reach ${printable(shownUrl(url))}${end.timedOutMs !== undefined ? `: no answer within ${end.timedOutMs} ms` : end.cause !== undefined ? ` (${printable(end.cause)})` : ''}${end.hint === undefined ? '' : `; ${end.hint}`}`);
  if (end.kind === 'closed' && end.code !== 1000) notice(`closed with ${end.code}${end.reason.length > 0 ? `: ${printable(end.reason)}` : end.code === 1006 ? ' (the connection was lost without a close: Sluice stopped or the network dropped)' : ''}`);
  // Said whatever ended it: which messages to send again (by id, a stored one is acked as a duplicate).
  const left = pacer.unfinished();
  if (left.sent.length + left.unsent.length > 0) {
    const parts = [
      ...(left.sent.length > 0 ? [`${left.sent.length} sent and unanswered, which may have been stored (${idList(left.sent)})`] : []),
      ...(left.unsent.length > 0 ? [`${left.unsent.length} not sent or waiting to be sent again (${idList(left.unsent)})`] : []),
    ];
    notice(`the socket ended with messages that have no answer: ${parts.join('; ')}. Send them again with the same ids: one that was stored is acked with "duplicate":true`);
  }
  if (stdinCut) notice(`stdin was read up to its message ${added}: the lines after it were not read`);
  if (end.kind !== 'closed') return 1;
  return end.code === 1000 && !failed && pacer.settled ? 0 : 1;
}

/**
 * What a refused upgrade said, escaped (whatever answered, it never drives the terminal), as the
 * start of a notice line: its message's full stop dropped, since the line goes on after it.
 */
const refusalText = (end: { readonly status: number; readonly body: string }): string => `refused with ${end.status}: ${printable(describeHandshakeRefusal(end.status, end.body)).replace(/\.$/, '')}`;

/** A frame's text as a notice quotes it: its first 200 characters. */
const truncated = (text: string): string => (text.length > 200 ? `${text.slice(0, 200)}… (${text.length} characters)` : text);

/** Ids as a short list: the first few, printable, and how many more. */
function idList(ids: ReadonlyArray<string | null>): string {
  const SHOWN = 10;
  const shown = ids.slice(0, SHOWN).map((id) => (id === null ? '(no id)' : printable(id)));
  return `${ids.length === 1 ? 'id' : 'ids'} ${shown.join(', ')}${ids.length > SHOWN ? ` and ${ids.length - SHOWN} more` : ''}`;
}
