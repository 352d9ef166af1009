import { runSqlCount } from './db/dialect.ts';
import type { Executor } from './db/executor.ts';
import type { Released } from './jobs/node-registry.ts';
import { isoAt } from './lib/clock.ts';
import { RELEASE_HOLDER } from './modules/outcomes/queue.sql.ts';
import { SQL as WEBHOOK_QUEUE_SQL } from './modules/webhooks/queue.sql.ts';

/**
 * Gives back everything `holder` (one run of a node: NodeSelf.holder) had claimed, once that run
 * is known to be dead (or is this process, stopping): its messages in `sending` are due again at
 * once (no attempt counted, as a lease running out would do), its Idempotency-Key claims may be
 * taken over by the next retry (the fingerprint stays, so a different body is still refused), its
 * webhook units and periodic-job leases are free. Run inside the caller's transaction.
 * It knows every queue, so it stands beside roles.ts, which hands it to the node membership.
 */
export async function releaseClaimsOf(db: Executor, holder: string, nowMs = Date.now()): Promise<Released> {
  const now = isoAt(nowMs);
  // The queues' own statements: each queue's SQL is kept in one file.
  const messages = await runSqlCount(db, RELEASE_HOLDER, [now, holder]);
  const keys = await db
    .updateTable('idempotency_keys')
    // Expired: the claim path takes an in-progress key over once locked_until has passed.
    .set({ locked_until: isoAt(0), locked_by: null })
    .where('state', '=', 'in_progress')
    .where('locked_by', '=', holder)
    .executeTakeFirst();
  const webhookUnits = await runSqlCount(db, WEBHOOK_QUEUE_SQL.releaseHolder, [holder, now]);
  const leases = await db
    .updateTable('leases')
    .set({ locked_until: isoAt(0) })
    .where('holder', '=', holder)
    .executeTakeFirst();
  return {
    messages,
    idempotencyKeys: Number(keys.numUpdatedRows),
    webhookUnits,
    leases: Number(leases.numUpdatedRows),
  };
}
