import { CompiledQuery } from 'kysely';
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
 * The claim reads the partial index messages_claimable in due order (migration 005).
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
  const pg = database.dialect === 'postgres';
  // Raw text: the states must be literals for the planners to use messages_claimable (migration
  // 005); a bound list would make them sort every due row on each claim.
  const params = pg ? [until, workerId, now, limit] : [until, workerId, until, now, now, limit];
  const res = await database.db.executeQuery<MessagesTable>(CompiledQuery.raw(pg ? CLAIM_PG : CLAIM_SQLITE, params));
  return res.rows;
}

const CLAIMABLE_SQL = `state in ('queued', 'deferred', 'sending')`;
const CLAIM_PG =
  `update messages set state = 'sending', locked_until = $1, locked_by = $2, next_attempt_at = $1, updated_at = $3 ` +
  // = any(array(...)): the due ids are picked first (an InitPlan), then fetched by primary key;
  // `in (select ...)` let the planner hash-join against a scan of the whole table.
  `where id = any(array(select id from messages where ${CLAIMABLE_SQL} and next_attempt_at <= $3 ` +
  'order by next_attempt_at limit $4 for update skip locked)) returning *';
const CLAIM_SQLITE =
  `update messages set state = 'sending', locked_until = ?, locked_by = ?, next_attempt_at = ?, updated_at = ? ` +
  // INDEXED BY: without statistics SQLite prefers messages_due and sorts every due row.
  `where id in (select id from messages indexed by messages_claimable where ${CLAIMABLE_SQL} ` +
  'and next_attempt_at <= ? order by next_attempt_at limit ?) returning *';

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
