import { type Kysely, sql } from 'kysely';

/**
 * Sending domains (docs/api.md "Sending domains"). Frozen once released.
 *
 * Ownership: several tenants may add the same domain (a pending claim proves nothing, so a
 * squatter adding it first cannot lock the real owner out), but at most one tenant may hold it
 * verified, as SparkPost does. The partial unique index below enforces that even when two
 * verifications race; like the delivery queue's due index, it is deliberately not led by
 * tenant_id because the rule spans tenants.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sending_domains')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('dkim_selector', 'text', (c) => c.notNull())
    .addColumn('dkim_private_key', 'text', (c) => c.notNull())
    .addColumn('dkim_public_key', 'text', (c) => c.notNull())
    .addColumn('return_path_domain', 'text', (c) => c.notNull())
    .addColumn('records', 'text', (c) => c.notNull())
    .addColumn('status_reason', 'text')
    .addColumn('verified_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('sending_domains_tenant_domain', ['tenant_id', 'domain'])
    .execute();
  await db.schema.createIndex('sending_domains_tenant_id').on('sending_domains').columns(['tenant_id', 'id']).execute();
  await db.schema
    .createIndex('sending_domains_verified_owner')
    .on('sending_domains')
    .column('domain')
    .unique()
    .where(sql.ref('status'), '=', 'verified')
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
