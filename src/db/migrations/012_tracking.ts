import type { Kysely } from 'kysely';

/**
 * Opens, clicks and one-click unsubscribe (docs/tracking.md).
 * - suppressions.scope: `all` (every message) or `marketing` (only marketing mail: what an
 *   unsubscribe creates, so password resets still reach the person).
 * - tenants.tracking_settings: JSON `{"open_tracking":{"transactional":bool,"marketing":bool},
 *   "click_tracking":{...}}`; null = the built-in defaults (off for transactional, on for marketing).
 * - tracking_firsts: one row per message and kind (open) or message and link (click), inserted
 *   when the first such event is written; "did the insert add a row" is the event's `first`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('suppressions')
    .addColumn('scope', 'text', (c) => c.notNull().defaultTo('all'))
    .execute();
  await db.schema.alterTable('tenants').addColumn('tracking_settings', 'text').execute();
  await db.schema
    .createTable('tracking_firsts')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('link', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('tracking_firsts_pk', ['message_id', 'kind', 'link'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('tracking_firsts').execute();
  await db.schema.alterTable('tenants').dropColumn('tracking_settings').execute();
  await db.schema.alterTable('suppressions').dropColumn('scope').execute();
}
