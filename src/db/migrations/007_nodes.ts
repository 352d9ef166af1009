import { type Kysely, sql } from 'kysely';

/**
 * Crash recovery at once (src/jobs/node-registry.ts): `nodes` holds one row per running process
 * with its heartbeat, and idempotency claims record which process holds them (`locked_by`, like
 * messages and webhook units), so the claims of a dead process can be given back as soon as it is
 * known dead rather than when their locks run out.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('nodes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('node_id', 'text', (c) => c.notNull())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('heartbeat_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('idempotency_keys').addColumn('locked_by', 'text').execute();
  // Releasing a dead process's claims (src/release-claims.ts) finds them by holder; only
  // claims in progress are indexed, so the index stays as small as the requests in flight.
  await db.schema
    .createIndex('idempotency_keys_in_progress')
    .on('idempotency_keys')
    .column('locked_by')
    .where(sql.ref('state'), '=', 'in_progress')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('idempotency_keys_in_progress').execute();
  await db.schema.alterTable('idempotency_keys').dropColumn('locked_by').execute();
  await db.schema.dropTable('nodes').execute();
}
