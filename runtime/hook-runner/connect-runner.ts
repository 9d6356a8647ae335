// Connects the runtime to a hook-runner per config: a supervised local child (`sluice dev`), an
// external address, or none. Returns the client and what must be stopped on shutdown.

import { loadRunnerToken } from '../../hook-runner/runner-token.ts';
import type { RuntimeConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import { createHookRunnerChild, type HookRunnerChild } from './child.ts';
import { HookRunnerClient } from './client.ts';

/** Runner lines an operator must see at the default level: warnings, crashes, the key-rotation result. */
const NOTEWORTHY_RUNNER_LINE = /warning:|failed unexpectedly|exited unexpectedly|will not be restarted|master key rotation/;

export interface RunnerConnection {
  readonly client: HookRunnerClient | undefined;
  readonly child: HookRunnerChild | undefined;
  close(): Promise<void>;
}

export async function connectRunner(config: RuntimeConfig, logger: Logger): Promise<RunnerConnection> {
  if (config.runner === 'off') return { client: undefined, child: undefined, close: async () => undefined };
  const token = loadRunnerToken(config.runnerToken, config.dataDir);
  if (config.runner !== 'child') {
    const client = new HookRunnerClient(config.runner.address, token);
    return {
      client,
      child: undefined,
      close: async () => {
        client.close();
      },
    };
  }
  const log = (line: string): void => (NOTEWORTHY_RUNNER_LINE.test(line) ? logger.warn : logger.debug)('hook-runner', { line });
  const child = await createHookRunnerChild({ dataDir: config.dataDir, token, log });
  const client = new HookRunnerClient(() => child.address(), token);
  return {
    client,
    child,
    close: async () => {
      client.close();
      await child.stop();
    },
  };
}
