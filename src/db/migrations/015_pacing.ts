import { type Kysely, sql } from 'kysely';

/**
 * Pacing and fair claims (docs/pacing.md).
 * - messages.priority: 0 transactional, 1 marketing (copied from the transmission at accept, so
 *   a claim can order by it without a join). Pending marketing rows are backfilled.
 * - messages_fair (tenant_id, priority, next_attempt_at) over the claimable states only: the
 *   claim walks the tenants with pending work (a skip scan: one index probe per tenant) and takes
 *   each one's due rows in priority then due order. Same predicate literals as messages_claimable
 *   (migration 005) so both planners match it; `if not exists` so an operator can build it first
 *   with CREATE INDEX CONCURRENTLY on a large PostgreSQL table.
 * - pacing_site_overrides: a tenant's limits per destination site (null = the shipped default).
 * - pacing_suspensions: one row per site x source address ('' = the host's default route) that an
 *   automation rule suspended or slowed until `until`. Not tenant-owned: the reputation of an
 *   address at a site is shared by every tenant sending from it.
 * - pacing_counts: messages granted per bucket (site x source address x scope) and time slot,
 *   the counters every PostgreSQL node shares so a limit holds across nodes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('messages')
    .addColumn('priority', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update messages set priority = 1 where state in ('queued', 'deferred', 'sending') and transmission_id in (select id from transmissions where mail_type = 'marketing')`.execute(
    db,
  );
  await sql`create index if not exists messages_fair on messages (tenant_id, priority, next_attempt_at) where state in ('queued', 'deferred', 'sending')`.execute(
    db,
  );
  await db.schema
    .createTable('pacing_site_overrides')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('site', 'text', (c) => c.notNull())
    .addColumn('max_connections', 'integer')
    .addColumn('messages_per_connection', 'integer')
    .addColumn('messages_per_minute', 'integer')
    .addColumn('messages_per_hour', 'integer')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('pacing_site_overrides_pk', ['tenant_id', 'site'])
    .execute();
  await db.schema
    .createTable('pacing_suspensions')
    .addColumn('site', 'text', (c) => c.notNull())
    .addColumn('source_address', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('factor', 'real', (c) => c.notNull().defaultTo(1))
    .addColumn('rule', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('until', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('pacing_suspensions_pk', ['site', 'source_address'])
    .execute();
  await db.schema
    .createTable('pacing_counts')
    .addColumn('bucket', 'text', (c) => c.notNull())
    .addColumn('slot', 'bigint', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('pacing_counts_pk', ['bucket', 'slot'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('pacing_counts').execute();
  await db.schema.dropTable('pacing_suspensions').execute();
  await db.schema.dropTable('pacing_site_overrides').execute();
  await db.schema.dropIndex('messages_fair').execute();
  await db.schema.alterTable('messages').dropColumn('priority').execute();
}
