import { sql } from 'kysely';
import type { Executor } from '../db/executor.ts';
import type { MessageState } from '../db/message-state.ts';
import { RELEASED_STATE_SQL } from '../db/message-state.ts';
import { isoAt } from '../lib/clock.ts';

export interface Released {
  messages: number;
  idempotencyKeys: number;
  webhookUnits: number;
  leases: number;
}

/**
 * Gives back everything `holder` (one run of a node: NodeSelf.holder) had claimed, once that run
 * is known to be dead (or is this process, stopping): its messages in `sending` are due again at
 * once (no attempt counted, as a lease running out would do), its Idempotency-Key claims may be
 * taken over by the next retry (the fingerprint stays, so a different body is still refused), its
 * webhook units and periodic-job leases are free. Run inside the caller's transaction.
 */
export async function releaseClaimsOf(db: Executor, holder: string, nowMs = Date.now()): Promise<Released> {
  const now = isoAt(nowMs);
  const messages = await db
    .updateTable('messages')
    .set({
      state: sql.raw<MessageState>(RELEASED_STATE_SQL),
      next_attempt_at: now,
      locked_by: null,
      locked_until: null,
      updated_at: now,
    })
    // state = 'sending': the partial index messages_leased (migration 020), not the table.
    .where('state', '=', 'sending')
    .where('locked_by', '=', holder)
    .executeTakeFirst();
  const keys = await db
    .updateTable('idempotency_keys')
    // Expired: the claim path takes an in-progress key over once locked_until has passed.
    .set({ locked_until: isoAt(0), locked_by: null })
    .where('state', '=', 'in_progress')
    .where('locked_by', '=', holder)
    .executeTakeFirst();
  const units = await db
    .updateTable('webhook_queue')
    .set({ locked_until: null, locked_by: null, next_attempt_at: now })
    .where('locked_by', '=', holder)
    .executeTakeFirst();
  const leases = await db
    .updateTable('leases')
    .set({ locked_until: isoAt(0) })
    .where('holder', '=', holder)
    .executeTakeFirst();
  return {
    messages: Number(messages.numUpdatedRows),
    idempotencyKeys: Number(keys.numUpdatedRows),
    webhookUnits: Number(units.numUpdatedRows),
    leases: Number(leases.numUpdatedRows),
  };
}
