import type { Kysely } from 'kysely';

/**
 * Fewer writes per accept. events_created (created_at) served only the
 * retention job; it now walks the primary key by id instead (an event id is a UUIDv7 minted
 * just after its created_at was read, so `id < uuidFloor(cutoff)` finds exactly the old rows that
 * `created_at < cutoff` does, bar the last millisecond, which the next run takes). Every index
 * left is used by a filter of GET /v1/events: docs/operations.md "Events indexes" shows each with
 * EXPLAIN.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('events_created').ifExists().execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('events_created').on('events').column('created_at').execute();
}
