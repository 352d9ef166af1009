import type { Kysely } from 'kysely';

/**
 * Group messages (docs/api.md "cc, bcc and inline images"): a transmission whose recipients
 * include `cc` or `bcc` ones. Each recipient still has its own message row; the row says how it
 * was addressed (`to`, `cc`, `bcc`), and so do its events. Both columns are null for every other
 * message and event, so existing rows need no update and adding them is a catalog change on both
 * databases (a nullable column without a default), on PostgreSQL for each day partition of
 * `events` as well.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('recipient_role', 'text').execute();
  await db.schema.alterTable('events').addColumn('role', 'text').execute();
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
