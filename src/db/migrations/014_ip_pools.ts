import type { Kysely } from 'kysely';

/**
 * IP pools and warmup (docs/ip-pools.md).
 * - ip_pools: named per tenant; `mail_types` JSON list; `is_default` 0/1 (one per tenant, kept by
 *   the service inside its transaction); `overflow_pool_id` another pool of the same tenant.
 * - ip_pool_addresses: the pool's source addresses with weights and an optional warmup policy.
 * - warmup_policies: `stages` JSON `[{"day","daily_limit","hourly_limit"?}]`, rate thresholds.
 * - warmup_counters: sends (and bounces, complaints) per source address and period
 *   (`d:2026-11-26` or `h:2026-11-26T05`). A send takes its slot with one atomic upsert that
 *   only increments below the limit, so the cap holds across every node sharing the database.
 * - warmup_progress: per source address, the warmup day it is on and the UTC day that was set.
 * - messages.source_address: the address a message was first sent from; retries keep it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('ip_pools')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('overflow_pool_id', 'text')
    .addColumn('is_default', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('mail_types', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('ip_pools_tenant_name').on('ip_pools').columns(['tenant_id', 'name']).unique().execute();

  await db.schema
    .createTable('ip_pool_addresses')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('pool_id', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('weight', 'integer', (c) => c.notNull())
    .addColumn('warmup_policy_id', 'text')
    .addColumn('position', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('ip_pool_addresses_pk', ['pool_id', 'address'])
    .execute();
  await db.schema
    .createIndex('ip_pool_addresses_tenant')
    .on('ip_pool_addresses')
    .columns(['tenant_id', 'pool_id'])
    .execute();

  await db.schema
    .createTable('warmup_policies')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('stages', 'text', (c) => c.notNull())
    .addColumn('max_bounce_rate', 'real', (c) => c.notNull())
    .addColumn('max_complaint_rate', 'real', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('warmup_policies_tenant_name')
    .on('warmup_policies')
    .columns(['tenant_id', 'name'])
    .unique()
    .execute();

  await db.schema
    .createTable('warmup_counters')
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('sent', 'integer', (c) => c.notNull())
    .addColumn('bounced', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('complained', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('warmup_counters_pk', ['address', 'period'])
    .execute();

  await db.schema
    .createTable('warmup_progress')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('warmup_day', 'integer', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .execute();

  await db.schema.alterTable('messages').addColumn('source_address', 'text').execute();
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
