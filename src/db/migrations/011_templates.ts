import type { Kysely } from 'kysely';

/**
 * Stored templates (docs/templates.md). A template row names the versions in use; every save is
 * a new, never-changed row of template_versions (numbered 1, 2, ... per template), so a
 * transmission that took a version keeps rendering exactly it. Headers and defaults are JSON text.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('templates')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('published_version', 'integer')
    .addColumn('draft_version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('templates_tenant_name')
    .on('templates')
    .columns(['tenant_id', 'name'])
    .unique()
    .execute();
  await db.schema.createIndex('templates_tenant_id').on('templates').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('template_versions')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('template_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('text', 'text')
    .addColumn('html', 'text')
    .addColumn('from', 'text')
    .addColumn('reply_to', 'text')
    .addColumn('headers', 'text', (c) => c.notNull())
    .addColumn('defaults', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('template_versions_pk', ['template_id', 'version'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
