// Peer (c), what a user might build instead: Fastify + the `standardwebhooks` package + better-sqlite3
// (WAL, synchronous=FULL). The same contract as Sluice: verify, dedup by a unique key, commit durably,
// answer 204/409. It stores one row per event where Sluice writes five records (inbox claim and its
// time index, event and its time index, recording), so it does less work: the ratio is conservative.

import { join } from 'node:path';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import { Webhook } from 'standardwebhooks';
import { announceListening, parsePeerArgs, stopOnSignal } from './peer-process.ts';

const args = parsePeerArgs();
const db = new Database(join(args.dataDir, 'events.sqlite'));
db.pragma('journal_mode = WAL');
// FULL: every commit fsyncs the WAL before it returns, so a 204 means the event is on disk.
db.pragma('synchronous = FULL');
db.exec(`CREATE TABLE IF NOT EXISTS events (
  org TEXT NOT NULL, source TEXT NOT NULL, event_id TEXT NOT NULL,
  type TEXT NOT NULL, payload TEXT NOT NULL, received_at INTEGER NOT NULL,
  PRIMARY KEY (org, source, event_id))`);
const insert = db.prepare('INSERT INTO events (org, source, event_id, type, payload, received_at) VALUES (?, ?, ?, ?, ?, ?)');
const webhook = new Webhook(args.secret);

const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });
// The signature covers the exact bytes: keep the body as the raw string, parse after verifying.
app.removeContentTypeParser('application/json');
app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, body));

app.post<{ Params: { org: string; source: string }; Body: string }>('/hooks/:org/:source', (request, reply) => {
  let event: unknown;
  try {
    event = webhook.verify(request.body, request.headers as Record<string, string>);
  } catch {
    return reply.code(401).send({ error: { code: 'invalid_signature', message: 'The webhook signature is invalid.' } });
  }
  const type = typeof event === 'object' && event !== null && 'type' in event ? event.type : undefined;
  if (typeof type !== 'string') {
    return reply.code(400).send({ error: { code: 'missing_event_type', message: 'The payload has no "type".' } });
  }
  const eventId = String(request.headers['webhook-id']);
  try {
    insert.run(request.params.org, request.params.source, eventId, type, request.body, Date.now());
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') throw error;
    return reply.code(409).send({ error: { code: 'duplicate_event', message: `Event ${eventId} was already received.` } });
  }
  return reply.code(204).send();
});

const address = await app.listen({ host: '127.0.0.1', port: args.port });
announceListening(Number(new URL(address).port));
stopOnSignal(async () => {
  await app.close();
  db.close();
});
