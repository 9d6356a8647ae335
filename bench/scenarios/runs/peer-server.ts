// Starts one of the peer programs in bench/peers/ as a server child (through tsx, from the repository
// root), resolved once it announced its port: what the run scenarios' peers (Redis, the BullMQ app)
// are started with.

import { join } from 'node:path';
import type { ServerChild } from '../../harness/children.ts';
import type { ScenarioContext } from '../../scenario.ts';

/** Starts `bench/peers/<script>` with `args`, named `name` in the bench's messages. */
export function startPeerServer(context: ScenarioContext, name: string, script: string, args: readonly string[]): Promise<ServerChild> {
  return context.children.startServer({
    name,
    command: process.execPath,
    args: ['--import', 'tsx', join(context.repoRoot, 'bench', 'peers', script), ...args],
    cwd: context.repoRoot,
    timeoutMs: 30_000,
  });
}
