// The shared runner token: from SLUICE_RUNNER_TOKEN or the 0600 file <dataDir>/runner-token
// (generated on first start), and its constant-time check against a call's metadata.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import type { Metadata } from '@grpc/grpc-js';
import { readOrCreatePrivateFile } from './private-file.ts';
import { RunnerConfigError } from './runner-error.ts';

const MIN_TOKEN_LENGTH = 16;

export const runnerTokenPath = (dataDir: string): string => join(dataDir, 'runner-token');

/**
 * The token as given, when a client can send it: gRPC metadata values are visible ASCII (grpc-js
 * refuses to send any other, so a runner started with one could be called by no one).
 */
export function parseRunnerToken(token: string, source: string): string {
  if (token.length < MIN_TOKEN_LENGTH || !/^[\x21-\x7e]+$/.test(token)) {
    throw new RunnerConfigError(`${source} must be at least ${MIN_TOKEN_LENGTH} visible ASCII characters (no spaces).`);
  }
  return token;
}

/** SLUICE_RUNNER_TOKEN wins when set; otherwise the token file, created with 32 random bytes. */
export function loadRunnerToken(envValue: string | undefined, dataDir: string): string {
  if (envValue !== undefined) return parseRunnerToken(envValue, 'SLUICE_RUNNER_TOKEN');
  const path = runnerTokenPath(dataDir);
  return parseRunnerToken(readOrCreatePrivateFile(path, () => randomBytes(32).toString('base64url')).text, path);
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * A predicate over call metadata: true only for `authorization: Bearer <token>`. Both sides are
 * hashed first so the comparison is constant-time and does not leak the token's length.
 */
export function createTokenCheck(token: string): (metadata: Metadata) => boolean {
  const expected = digest(`Bearer ${token}`);
  return (metadata) => {
    const [value] = metadata.get('authorization');
    if (typeof value !== 'string') return false;
    return timingSafeEqual(digest(value), expected);
  };
}
