import { type Kysely, sql } from 'kysely';

/**
 * Claims that move as few index entries as possible (docs/benchmarks.md "Fair claims").
 *
 * A claim sets state 'sending', the lease and next_attempt_at = the lease's end. Before, every
 * claimed row moved its entry in three indexes: messages_due (state, next_attempt_at, every row
 * of the table), messages_claimable (next_attempt_at) and messages_fair (tenant_id, priority,
 * next_attempt_at), both over queued, deferred and sending. A fair claim takes its rows from 32
 * tenants, so 32 places in each B-tree were written twice (the old entry and the new one), and
 * that was most of the claim's cost (WAL pages per 200-row claim 359, FIFO's 55).
 *
 * Now the indexes a claim reads hold the waiting rows only (queued, deferred): a claim deletes
 * their entries (pages it has just read) and inserts one entry per row in messages_leased
 * (locked_until) over `sending` only, where all of one claim's rows are neighbours (same lease
 * end). Leases that ran out are found there (crash recovery, node takeover), as are the sending
 * counts of the queue gauges and a dead node's claims (release-claims.ts).
 * - messages_waiting (next_attempt_at, state): the earliest due waiting message (the claim's
 *   "anything due?" probe, the gauges), the FIFO claim, and the gauges' counts by state
 *   (index-only). Replaces messages_claimable.
 * - messages_waiting_fair (tenant_id, priority, next_attempt_at): the fair claim's tenant walk
 *   and per-tenant ranges. Replaces messages_fair.
 * - messages_due (state, next_attempt_at) is dropped: its readers were the gauges and the
 *   release of a dead node's claims, both served above; finished rows (most of the table) no
 *   longer carry an entry that every outcome moved.
 * The predicates are literals (message-state.ts WAITING_SQL) so both planners match them.
 * `if not exists`: on a large PostgreSQL table an operator may build the new indexes first with
 * CREATE INDEX CONCURRENTLY (docs/operations.md); the drops are quick.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index if not exists messages_waiting on messages (next_attempt_at, state) where state in ('queued', 'deferred')`.execute(
    db,
  );
  await sql`create index if not exists messages_waiting_fair on messages (tenant_id, priority, next_attempt_at) where state in ('queued', 'deferred')`.execute(
    db,
  );
  await sql`create index if not exists messages_leased on messages (locked_until) where state = 'sending'`.execute(db);
  await sql`drop index if exists messages_claimable`.execute(db);
  await sql`drop index if exists messages_fair`.execute(db);
  await sql`drop index if exists messages_due`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('messages_due').on('messages').columns(['state', 'next_attempt_at']).execute();
  await sql`create index if not exists messages_claimable on messages (next_attempt_at) where state in ('queued', 'deferred', 'sending')`.execute(
    db,
  );
  await sql`create index if not exists messages_fair on messages (tenant_id, priority, next_attempt_at) where state in ('queued', 'deferred', 'sending')`.execute(
    db,
  );
  await sql`drop index if exists messages_leased`.execute(db);
  await sql`drop index if exists messages_waiting_fair`.execute(db);
  await sql`drop index if exists messages_waiting`.execute(db);
}
