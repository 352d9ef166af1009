import type { Kysely } from 'kysely';

/**
 * Dashboard accounts (docs/dashboard.md "Accounts and sessions"). Frozen once released; portable column types only.
 *
 * - dashboard_users: people who sign in to the web portal; each belongs to one tenant. The email
 *   (lower-cased) is unique across tenants because it alone picks the account at sign-in.
 *   password_hash is scrypt (lib/crypto.ts), null until a user who got a one-time link sets one.
 * - dashboard_sessions: id is the SHA-256 of the random session token held in the cookie (a
 *   leaked table cannot be replayed); csrf_token is the synchronizer token every state-changing
 *   request must echo in X-CSRF-Token.
 * - dashboard_login_links: one-time sign-in links, also stored as the SHA-256 of their token.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('dashboard_users')
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('last_login_at', 'text')
    .execute();
  await db.schema.createIndex('dashboard_users_tenant_id').on('dashboard_users').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('dashboard_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    // 1 when started from a one-time link: such a session may set a password without the old one.
    .addColumn('via_link', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_seen_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('dashboard_sessions_user').on('dashboard_sessions').column('user_id').execute();
  await db.schema.createIndex('dashboard_sessions_expires').on('dashboard_sessions').column('expires_at').execute();

  await db.schema
    .createTable('dashboard_login_links')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .execute();
  await db.schema
    .createIndex('dashboard_login_links_expires')
    .on('dashboard_login_links')
    .column('expires_at')
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
