import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * PostgreSQL: vacuum `messages` after a fixed number of dead rows plus 2 % of the table, not the
 * server's default 50 + 20 % (docs/benchmarks.md "Session 2026-12-07").
 *
 * Every message is updated at least twice (the claim, the outcome), and no update can be HOT: each
 * changes `state`, which the partial indexes' predicates read, or `next_attempt_at` /
 * `locked_until`, which they hold (migration 020), so a lower fillfactor would not help. Every
 * claimed row leaves a dead entry at the front of messages_waiting and messages_waiting_fair (the
 * earliest due), exactly where each claim, each "anything due?" probe and the queue gauges start
 * reading, until a VACUUM removes it. Finished messages stay in the table until retention, so
 * under the default rule the dead rows allowed between two vacuums grow with the table: 20 % of
 * it, 86,000 dead entries for every claim to step over after 30 minutes at 240 messages/s.
 * 1,000 + 2 % keeps them near a constant.
 *
 * The settings are autovacuum's per-table storage parameters; with autovacuum off, Postyard's own
 * maintenance job reads them too (src/jobs/table-maintenance.ts). SQLite: nothing (no vacuum
 * thresholds; its freed pages are reused by the next inserts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`alter table messages set (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0.02)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`alter table messages reset (autovacuum_vacuum_threshold, autovacuum_vacuum_scale_factor)`.execute(db);
}
