import type { Database } from '../../db/index.ts';
import type { Executor } from '../../db/executor.ts';
import type { MessagesTable } from '../../db/schema.ts';
import { isoAt } from '../../lib/clock.ts';

/** States a message is claimable in. `sending` rows are claimable again once their lease ran out. */
const CLAIMABLE = ['queued', 'deferred', 'sending'];

/**
 * The delivery queue is the messages table itself (no second queue to lose). A claim moves due
 * rows to `sending` and pushes next_attempt_at to the lease's end, so one index range
 * (state, next_attempt_at) finds both due work and work whose worker died: a crashed worker's
 * messages come back when the lease expires, never lost.
 * PostgreSQL: FOR UPDATE SKIP LOCKED lets many workers claim disjoint batches.
 * SQLite: the UPDATE ... RETURNING statement is atomic under the single writer lock.
 */
export async function claimDueMessages(
  database: Database,
  workerId: string,
  limit: number,
  leaseMs: number,
  nowMs: number = Date.now(),
): Promise<MessagesTable[]> {
  const now = isoAt(nowMs);
  const until = isoAt(nowMs + leaseMs);
  const db = database.db;
  let due = db
    .selectFrom('messages')
    .select('id')
    .where('state', 'in', CLAIMABLE)
    .where('next_attempt_at', '<=', now)
    .orderBy('next_attempt_at')
    .limit(limit);
  if (database.dialect === 'postgres') due = due.forUpdate().skipLocked();
  return db
    .updateTable('messages')
    .set({ state: 'sending', locked_until: until, locked_by: workerId, next_attempt_at: until, updated_at: now })
    .where('id', 'in', due)
    .returningAll()
    .execute();
}

/** Earliest next_attempt_at among claimable messages (to sleep until then), or null. */
export async function nextDueAt(db: Executor): Promise<string | null> {
  const row = await db
    .selectFrom('messages')
    .select((eb) => eb.fn.min('next_attempt_at').as('at'))
    .where('state', 'in', CLAIMABLE)
    .executeTakeFirst();
  return (row?.at as string | null | undefined) ?? null;
}

export async function loadTransmission(db: Executor, tenantId: string, id: string) {
  return db
    .selectFrom('transmissions')
    .select(['id', 'tenant_id', 'content', 'raw_message', 'options', 'mail_type', 'tags', 'created_at'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}
