// Ends the device connections a data directory holds open, as a runtime's start does, in a child
// process whose heap limit the test sets: `tsx device-restart-child.ts <dataDir> <nowMs>` prints
// how many it ended.

import { writeSync } from 'node:fs';
import { EventStore } from '../../runtime/events/event-store.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { DeviceStore } from '../../runtime/triggers/device-store.ts';

const [dataDir, nowMs] = process.argv.slice(2);
if (dataDir === undefined || nowMs === undefined) throw new Error('usage: device-restart-child.ts <dataDir> <nowMs>');
const ledger = openLedger(dataDir);
const devices = new DeviceStore(ledger, new EventStore(ledger, new Inbox(ledger, 60_000)));
writeSync(1, `${await devices.endConnectionsLeftOpen(Number(nowMs))}\n`);
await ledger.close();
