// Stdout and stderr streams for a CLI command run in-process, keeping what it writes to each.

import { PassThrough } from 'node:stream';

export interface CapturedOutput {
  readonly stdout: PassThrough;
  readonly stderr: PassThrough;
  /** What was written to stdout so far. */
  out(): string;
  /** What was written to stderr so far. */
  err(): string;
}

export function capturedOutput(): CapturedOutput {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  return { stdout, stderr, out: () => out, err: () => err };
}
