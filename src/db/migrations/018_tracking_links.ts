import type { Kysely } from 'kysely';

/**
 * tracking_links: a transmission's link table (docs/tracking.md "Tokens"). One row per distinct
 * tracked URL of the transmission's html, written at accept in the transmission's transaction;
 * version 2 click tokens name a row (`idx`) instead of carrying the URL. The row belongs to the
 * transmission's tenant. It goes with its transmission (`on delete cascade`), so whatever purges
 * transmissions purges their links without knowing about them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('tracking_links')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('transmission_id', 'text', (c) => c.notNull().references('transmissions.id').onDelete('cascade'))
    .addColumn('idx', 'integer', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('tracking_links_pk', ['transmission_id', 'idx'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('tracking_links').execute();
}
