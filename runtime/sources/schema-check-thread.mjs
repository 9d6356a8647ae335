// Entry of the schema-check worker thread: a worker does not inherit tsx's loader from the thread
// that starts it, so this plain module registers it before loading the TypeScript worker.

import { register } from 'tsx/esm/api';

register();
await import('./schema-check-worker.ts');
