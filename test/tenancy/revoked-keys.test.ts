// Revoked API keys stay listed as a record of who had access, the latest MAX_REVOKED_API_KEYS of
// them: a new key drops the records of the oldest revocations past the cap, so creating and revoking
// keys cannot grow an org without end. Revocations from before the index are counted too. Through
// the real ApiKeyStore on both ledgers (a cap of 3 and of 2 here).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { ApiKeyStore } from '../../runtime/tenancy/api-keys.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const at = (minute: number): string => new Date(Date.UTC(2026, 11, 2, 12, minute)).toISOString();

for (const kind of LEDGER_KINDS) {
  test(`${kind.name}: a new key forgets the oldest revocations past the cap; a forgotten key is still refused`, async () => {
    const { ledger, close } = kind.open();
    try {
      const store = new ApiKeyStore(ledger, 3);
      const keys: Array<{ id: string; key: string }> = [];
      for (let i = 0; i < 5; i++) {
        const { record, key } = await store.create('org_k', 'viewer', at(i));
        keys.push({ id: record.id, key });
      }
      // Revoked in another order than created: the oldest revocations go first.
      const revokeOrder = [3, 0, 4, 1];
      for (const [minute, i] of revokeOrder.entries()) await store.revoke('org_k', keys[i]!.id, at(10 + minute));
      assert.equal(store.list('org_k').filter((record) => record.revoked_at !== undefined).length, 4, 'revoking alone forgets nothing');

      const kept = await store.create('org_k', 'admin', at(20));
      const listed = store.list('org_k');
      const revoked = listed.filter((record) => record.revoked_at !== undefined).map((record) => record.id).sort();
      assert.deepEqual(revoked, [keys[0]!.id, keys[4]!.id, keys[1]!.id].sort(), 'the first revocation (key 3) is forgotten');
      assert.deepEqual(listed.filter((record) => record.revoked_at === undefined).map((record) => record.id).sort(), [keys[2]!.id, kept.record.id].sort());
      assert.equal(store.findActive(keys[3]!.key), undefined, 'a forgotten key is refused as a revoked one is');
      await assert.rejects(store.revoke('org_k', keys[3]!.id, at(30)), /API key/);
      assert.ok(store.findActive(kept.key));
    } finally {
      await close();
    }
  });

  test(`${kind.name}: a key is refused from the moment its revocation is asked; one whose revocation failed to be confirmed stays refused, one the disk floor refused holds again`, async () => {
    const { ledger, close } = kind.open();
    try {
      const store = new ApiKeyStore(ledger);
      const first = await store.create('org_r', 'admin', at(0));
      const revoking = store.revoke('org_r', first.record.id, at(1));
      assert.equal(store.findActive(first.key), undefined, 'refused while the revocation is saved');
      assert.equal(store.isActive('org_r', first.record.id), false);
      assert.equal((await revoking).revoked_at, at(1));
      assert.equal(store.findActive(first.key), undefined);

      const second = await store.create('org_r', 'admin', at(2));
      const root = ledger.root as unknown as { transaction: (...args: unknown[]) => unknown };
      const transaction = root.transaction;
      root.transaction = () => {
        root.transaction = transaction;
        return Promise.reject(new Error('the disk failed'));
      };
      await assert.rejects(store.revoke('org_r', second.record.id, at(3)), /the disk failed/);
      assert.equal(store.get('org_r', second.record.id)?.revoked_at, undefined, 'not revoked on disk');
      assert.equal(store.findActive(second.key), undefined, 'it may have taken effect: refused all the same');
      assert.equal(store.isActive('org_r', second.record.id), false);

      // Refused by the disk floor, the revocation wrote nothing: the key holds again.
      const third = await store.create('org_r', 'admin', at(4));
      root.transaction = () => {
        root.transaction = transaction;
        throw new DiskSpaceLowError(1024, 4096);
      };
      await assert.rejects(store.revoke('org_r', third.record.id, at(5)), DiskSpaceLowError);
      assert.equal(store.findActive(third.key)?.id, third.record.id);
      assert.equal(store.isActive('org_r', third.record.id), true);
    } finally {
      await close();
    }
  });

  test(`${kind.name}: revocations from before the index count toward the cap`, async () => {
    const { ledger, close } = kind.open();
    try {
      const store = new ApiKeyStore(ledger, 2);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await store.create('org_old', 'viewer', at(i))).record.id);
      for (const [minute, id] of ids.entries()) await store.revoke('org_old', id, at(10 + minute));
      // As a release before the index left them: revoked records, no index entries, no marker.
      const index = ledger.openDatabase('api-keys-revoked');
      await ledger.root.transaction(() => {
        for (const key of [...index.getKeys({ start: ['org_old'], end: ['org_old', '\uffff'] })]) index.remove(key);
        index.remove(['org_old', '']);
      });
      await store.create('org_old', 'viewer', at(20));
      const revoked = store.list('org_old').filter((record) => record.revoked_at !== undefined).map((record) => record.id).sort();
      assert.deepEqual(revoked, ids.slice(2).sort());
    } finally {
      await close();
    }
  });

  test(`${kind.name}: two revokes of one key at once keep one revocation: one time, one place in the order`, async () => {
    const { ledger, close } = kind.open();
    try {
      const store = new ApiKeyStore(ledger, 1);
      const { record } = await store.create('org_twice', 'viewer', at(0));
      const [first, second] = await Promise.all([store.revoke('org_twice', record.id, at(1)), store.revoke('org_twice', record.id, at(2))]);
      assert.equal(first.revoked_at, at(1));
      assert.equal(second.revoked_at, at(1), 'the second revoke answers the first one\'s time');
      const index = ledger.openDatabase('api-keys-revoked');
      assert.equal([...index.getKeys({ start: ['org_twice', '0'], end: ['org_twice', '\uffff'] })].length, 1);
      // With a cap of 1, the one revocation is kept when the next key is made.
      await store.create('org_twice', 'viewer', at(3));
      assert.deepEqual(store.list('org_twice').filter((key) => key.revoked_at !== undefined).map((key) => key.id), [record.id]);
    } finally {
      await close();
    }
  });
}
