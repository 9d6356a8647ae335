// Peer infrastructure: Debian's redis-server on a free loopback port and a fresh dir, with the AOF on
// and fsynced before every reply (appendonly yes, appendfsync always), announced like every peer.
//
// Child process. Usage: node --import tsx redis-server.ts --data-dir <dir>

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';
import { announceListening, stopOnSignal } from './peer-process.ts';

const { values } = parseArgs({ options: { 'data-dir': { type: 'string' } } });
const dir = values['data-dir'];
if (dir === undefined) throw new Error('--data-dir is required');

/** Asks the kernel for a free port; redis-server cannot report one it picked itself. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const port = await freePort();
const redis = spawn(
  'redis-server',
  ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--protected-mode', 'no', '--daemonize', 'no'],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
redis.once('exit', (code, signal) => {
  process.stderr.write(`redis-server exited (code ${code ?? 'none'}, signal ${signal ?? 'none'})\n`);
  process.exit(1);
});
let output = '';
let announced = false;
redis.stdout?.on('data', (chunk: Buffer) => {
  if (announced) return;
  output = (output + chunk.toString('utf8')).slice(-4096);
  if (output.includes('Ready to accept connections')) {
    announced = true;
    announceListening(port);
  }
});
stopOnSignal(
  () =>
    new Promise<void>((resolve) => {
      redis.removeAllListeners('exit');
      redis.once('exit', () => resolve());
      redis.kill('SIGTERM');
    }),
);
