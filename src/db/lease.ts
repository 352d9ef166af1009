import type { Database } from './index.ts';
import { isoAt } from '../lib/clock.ts';

/**
 * A named lease row so that a periodic task runs on one node at a time. The holder renews it
 * by acquiring again; a crashed holder's lease simply expires. Returns true when we hold it.
 */
export async function acquireLease(database: Database, name: string, holder: string, ttlMs: number): Promise<boolean> {
  const now = Date.now();
  const until = isoAt(now + ttlMs);
  const db = database.db;
  await db
    .insertInto('leases')
    .values({ name, holder, locked_until: isoAt(0) })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const res = await db
    .updateTable('leases')
    .set({ holder, locked_until: until })
    .where('name', '=', name)
    .where((eb) => eb.or([eb('holder', '=', holder), eb('locked_until', '<', isoAt(now))]))
    .executeTakeFirst();
  return Number(res.numUpdatedRows) === 1;
}
