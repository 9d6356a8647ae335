// The transport floor of a hook-runner call: a bare @grpc/grpc-js server whose one unary method
// echoes its bytes, with no auth, parsing or work. Child process; announces its port like every peer.
//
// Usage: node --import tsx grpc-echo.ts

import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import { announceListening, stopOnSignal } from './peer-process.ts';

const passBytes = (bytes: Buffer): Buffer => bytes;

/** One raw-bytes unary method; the client in grpc-worker.ts builds its stub from the same definition. */
export const ECHO_SERVICE: ServiceDefinition = {
  Echo: {
    path: '/sluice.bench.Floor/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: passBytes,
    requestDeserialize: passBytes,
    responseSerialize: passBytes,
    responseDeserialize: passBytes,
  },
};

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = new Server();
  server.addService(ECHO_SERVICE, { Echo: (call: { request: Buffer }, done: (error: null, reply: Buffer) => void) => done(null, call.request) });
  server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => {
    if (error !== null) throw error;
    announceListening(port);
  });
  stopOnSignal(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
}
