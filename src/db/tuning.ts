import { sql } from 'kysely';
import { isPostgres } from './dialect.ts';
import type { Executor } from './executor.ts';

/*
 * What a module may ask of the database beyond plain statements, each a no-op where the running
 * database has no such thing, so that modules never test which database runs.
 */

/**
 * Commit this transaction without waiting for its WAL flush (PostgreSQL `synchronous_commit = off`;
 * SQLite's group commit decides its own flushes). Only for writes that are safe to lose in a crash.
 */
export async function commitWithoutFlush(trx: Executor): Promise<void> {
  if (isPostgres(trx)) await sql`set local synchronous_commit = off`.execute(trx);
}

/** Refreshes the planner's statistics of one of our tables (PostgreSQL ANALYZE; SQLite plans without). */
export async function refreshStatistics(db: Executor, table: string): Promise<void> {
  if (isPostgres(db)) await sql`analyze ${sql.table(table)}`.execute(db);
}

/**
 * Whether a list can be bound as one array parameter (PostgreSQL `= any($1::text[])`): one
 * statement whatever the list's length. SQLite takes lists as JSON (`json_each`) or IN lists.
 */
export function bindsArrays(db: Executor): boolean {
  return isPostgres(db);
}
