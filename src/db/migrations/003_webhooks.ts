import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * Webhooks, their delivery pipeline, and the tag side table of the events API.
 * Frozen once released; portable column types only (one migration for SQLite and PostgreSQL).
 *
 * Pipeline: insertEvents() writes one `webhook_outbox` row per event in the transaction of the
 * change itself. The dispatcher's fan-out claims outbox rows and turns them into delivery units
 * (`webhook_queue`) of each subscribed webhook, deleting the outbox rows in the same transaction,
 * so fan-out is durable and never depends on commit order (ids are not commit-ordered across
 * nodes, which rules out a plain cursor over events.id). Queue rows carry the retry state and a
 * lease (locked_until) so several nodes can deliver safely; they are deleted once delivered or
 * given up. `webhook_deliveries` is the attempt log shown by the API.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhooks')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('dispatch_policy', 'text', (c) => c.notNull())
    .addColumn('batch_max_size', 'integer', (c) => c.notNull())
    .addColumn('batch_max_wait_ms', 'integer', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('disabled_reason', 'text')
    // AES-256-GCM under the master key (lib/crypto.ts); the raw secret is shown once.
    .addColumn('secret_enc', 'text', (c) => c.notNull())
    .addColumn('previous_secret_enc', 'text')
    .addColumn('previous_secret_expires_at', 'text')
    // Start of the current run of failed attempts (null after a success): 5 days of it disables.
    .addColumn('failing_since', 'text')
    .addColumn('last_success_at', 'text')
    .addColumn('last_failure_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhooks_tenant_id').on('webhooks').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('webhook_outbox')
    .addColumn('event_id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .execute();

  // A delivery unit: events of one webhook that travel (and are retried) together. With the
  // single policy a unit holds one event; with the batch policy fan-out packs up to
  // batch_max_size events of a round into one unit, so a busy batch webhook costs one row per
  // POST rather than one per event, and a POST may combine several small units.
  await db.schema
    .createTable('webhook_queue')
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('event_ids', 'text', (c) => c.notNull())
    .addColumn('event_count', 'integer', (c) => c.notNull())
    // created_at of the unit's oldest event: event retention keeps events from there on.
    .addColumn('oldest_event_at', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    .addColumn('locked_until', 'text')
    .addColumn('locked_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('webhook_queue_pk', ['webhook_id', 'id'])
    .execute();
  // Each webhook's due work, oldest first: the claim query is one range scan of this index.
  await db.schema
    .createIndex('webhook_queue_due')
    .on('webhook_queue')
    .columns(['webhook_id', 'next_attempt_at'])
    .execute();
  await db.schema
    .createIndex('webhook_queue_tenant')
    .on('webhook_queue')
    .columns(['tenant_id', 'oldest_event_at'])
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('batch_id', 'text')
    .addColumn('event_ids', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('next_attempt_at', 'text')
    // 1 for attempts made by POST /v1/webhooks/{id}/test.
    .addColumn('test', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_webhook')
    .on('webhook_deliveries')
    .columns(['tenant_id', 'webhook_id', 'id'])
    .execute();
  await db.schema.createIndex('webhook_deliveries_created').on('webhook_deliveries').column('created_at').execute();

  // Tag filter of GET /v1/events. events.tags is a JSON array in a text column; a LIKE over the
  // serialized text cannot use an index (a rare tag scans every event of the tenant) and is not
  // exact (a tag can appear escaped inside another one). One row per (event, tag) gives an exact
  // match and a keyset index in newest-first order, on both backends.
  await db.schema
    .createTable('event_tags')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('tag', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('event_tags_pk', ['tenant_id', 'tag', 'event_id'])
    .execute();
  await db.schema.createIndex('event_tags_event').on('event_tags').column('event_id').execute();

  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    // Queue tables swing from empty to a large backlog and back within seconds. PostgreSQL's
    // defaults (vacuum/analyze after 20 %/10 % of the table changed) leave dead tuples and
    // stale statistics behind, and stale statistics turn the claim query's ordered index scan
    // into a sort of the whole backlog. Vacuum and analyze them after every few thousand rows.
    for (const table of ['webhook_queue', 'webhook_outbox']) {
      await sql`alter table ${sql.table(table)} set (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000)`.execute(
        db,
      );
    }
  }
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
