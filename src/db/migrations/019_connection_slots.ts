import type { Kysely } from 'kysely';

/**
 * Connection slots (docs/pacing.md "Connections across nodes"): one row per SMTP session
 * slot of a bucket (site x source address x scope), numbered below the site's max_connections and
 * leased by one node's session until expires_at (epoch ms of the database's clock). PostgreSQL
 * nodes take, renew (by `node`) and delete them; SQLite counts sessions in memory and leaves the
 * table empty (kept so both dialects have the same schema).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('pacing_connection_slots')
    .addColumn('bucket', 'text', (c) => c.notNull())
    .addColumn('slot', 'integer', (c) => c.notNull())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('node', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('pacing_connection_slots_pk', ['bucket', 'slot'])
    .execute();
  await db.schema.createIndex('pacing_connection_slots_node').on('pacing_connection_slots').column('node').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('pacing_connection_slots').execute();
}
