// `sluice device`: acts as a device from a terminal. It opens a device socket with the device's
// token, sends each `--send` message (or each line of stdin), prints every frame Sluice answers as
// one JSON line, and ends once each message has its answer: exit 0 if all were acked.

import type { Readable, Writable } from 'node:stream';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { credentialProblem } from '../kits/client/credential-check.ts';
import { DEVICE_SILENCE_MS } from '../kits/client/device-connection.ts';
import { runSocket } from '../kits/client/socket-run.ts';
import { credentialOf } from './cli-credential.ts';
import { InputError } from './errors.ts';
import { DEVICE_PROTOCOL } from './triggers/device-upgrade.ts';

const USAGE = 'usage: sluice device <ws://host:port/devices/<org>/<device>> [--token <device token>, or SLUICE_DEVICE_TOKEN] [--send <json>]... (without --send: one message per stdin line)';

export interface DeviceCommandIo {
  readonly stdin: Readable;
  readonly stdout: Writable;
  /** Where SLUICE_DEVICE_TOKEN is read when --token is not given. */
  readonly env?: NodeJS.ProcessEnv;
}

/** Runs the command; resolves with the exit code (0: every message acked). */
export async function deviceCommand(args: readonly string[], io: DeviceCommandIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { token: { type: 'string' }, send: { type: 'string', multiple: true } },
  });
  const url = positionals[0];
  if (positionals.length !== 1 || url === undefined || !/^wss?:\/\//.test(url)) throw new InputError(400, 'usage', USAGE);
  const token = credentialOf(values.token === '' ? undefined : values.token, io.env ?? {}, 'SLUICE_DEVICE_TOKEN');
  if (token === undefined) throw new InputError(400, 'usage', `A device token is required: --token, or SLUICE_DEVICE_TOKEN. ${USAGE}`);
  const problem = credentialProblem('The device token', token);
  if (problem !== undefined) throw new InputError(400, 'usage', problem);
  const print = (line: string): void => void io.stdout.write(`${line}\n`);
  /** Messages sent and not answered yet (Sluice answers each frame once, with an ack or a nack). */
  let outstanding = 0;
  let failed = false;
  let sending = true;
  const maybeEnd = (): void => {
    if (!sending && outstanding === 0) socket.close(1000);
  };
  const send = (text: string): void => {
    const line = text.trim();
    if (line === '') return;
    outstanding++;
    socket.send(line);
  };
  // The token rides as a subprotocol entry, not in the URL, so it stays out of access logs.
  const { socket, ended } = runSocket(new URL(url), [DEVICE_PROTOCOL, token], (data) => {
    const text = data.toString('utf8');
    print(text);
    const frame = JSON.parse(text) as { type: string };
    if (frame.type === 'ready') {
      if (values.send !== undefined) {
        for (const message of values.send) send(message);
        sending = false;
        maybeEnd();
        return;
      }
      const lines = createInterface({ input: io.stdin });
      lines.on('line', send);
      lines.on('close', () => {
        sending = false;
        maybeEnd();
      });
      return;
    }
    if (frame.type === 'nack') failed = true;
    outstanding--;
    maybeEnd();
  }, DEVICE_SILENCE_MS);
  const end = await ended;
  if (end.kind === 'refused') print(`refused with ${end.status}: ${end.body}`);
  if (end.kind === 'unreachable') print(`could not reach ${url}`);
  if (end.kind !== 'closed') return 1;
  if (end.code !== 1000) print(`closed with ${end.code}${end.reason.length > 0 ? `: ${end.reason}` : ''}`);
  return end.code === 1000 && !failed && outstanding === 0 ? 0 : 1;
}
