import type { Kysely } from 'kysely';

/**
 * Frozen once released: change the schema with a new numbered migration, never by editing this.
 * Only portable column types are used (text, integer, real, bigint) so one migration serves both
 * SQLite and PostgreSQL.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('tenants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('default_from', 'text')
    .addColumn('rate_limit_rps', 'integer')
    .addColumn('rate_limit_burst', 'integer')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_prefix', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .addColumn('deleted_at', 'text')
    .execute();
  await db.schema.createIndex('api_keys_tenant_id').on('api_keys').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('smtp_credentials')
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id'))
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('username', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .addColumn('deleted_at', 'text')
    .execute();
  await db.schema
    .createIndex('smtp_credentials_tenant_id')
    .on('smtp_credentials')
    .columns(['tenant_id', 'id'])
    .execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('locked_until', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['tenant_id', 'scope', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_expires').on('idempotency_keys').column('expires_at').execute();

  await db.schema
    .createTable('suppressions')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('identifier', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('reason_category', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('suppressions_identity', ['tenant_id', 'type', 'identifier'])
    .execute();
  await db.schema.createIndex('suppressions_tenant_id').on('suppressions').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('transmissions')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('mail_type', 'text', (c) => c.notNull())
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('metadata', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('raw_message', 'text')
    .addColumn('options', 'text', (c) => c.notNull())
    .addColumn('total_accepted', 'integer', (c) => c.notNull())
    .addColumn('total_rejected', 'integer', (c) => c.notNull())
    .addColumn('start_time', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('transmissions_tenant_id').on('transmissions').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('messages')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('transmission_id', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('recipient_name', 'text')
    .addColumn('recipient_domain', 'text', (c) => c.notNull())
    .addColumn('substitution_data', 'text')
    .addColumn('metadata', 'text')
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempt_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    .addColumn('locked_until', 'text')
    .addColumn('locked_by', 'text')
    .addColumn('last_response', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('messages_tenant_transmission')
    .on('messages')
    .columns(['tenant_id', 'transmission_id', 'id'])
    .execute();
  // The delivery queue's due-time index: the one deliberate index not led by tenant_id,
  // because workers claim due work across all tenants.
  await db.schema.createIndex('messages_due').on('messages').columns(['state', 'next_attempt_at']).execute();

  await db.schema
    .createTable('delivery_attempts')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text', (c) => c.notNull())
    .addColumn('mx_host', 'text')
    .addColumn('address', 'text')
    .addColumn('tls', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('smtp_code', 'integer')
    .addColumn('enhanced_code', 'text')
    .addColumn('response', 'text')
    .addColumn('transcript', 'text')
    .execute();
  await db.schema
    .createIndex('delivery_attempts_message')
    .on('delivery_attempts')
    .columns(['tenant_id', 'message_id', 'attempt'])
    .execute();

  await db.schema
    .createTable('events')
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('transmission_id', 'text')
    .addColumn('message_id', 'text')
    .addColumn('recipient', 'text')
    .addColumn('mail_type', 'text')
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('metadata', 'text', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .execute();
  // Newest-first pages per tenant, and the filters of GET /v1/events.
  await db.schema.createIndex('events_tenant_id').on('events').columns(['tenant_id', 'id']).execute();
  await db.schema.createIndex('events_tenant_type').on('events').columns(['tenant_id', 'type', 'id']).execute();
  await db.schema
    .createIndex('events_tenant_recipient')
    .on('events')
    .columns(['tenant_id', 'recipient', 'id'])
    .execute();
  await db.schema
    .createIndex('events_tenant_transmission')
    .on('events')
    .columns(['tenant_id', 'transmission_id', 'id'])
    .execute();
  await db.schema
    .createIndex('events_tenant_message')
    .on('events')
    .columns(['tenant_id', 'message_id', 'id'])
    .execute();
  await db.schema.createIndex('events_created').on('events').column('created_at').execute();

  await db.schema
    .createTable('leases')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('locked_until', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('rate_limit_buckets')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('tokens', 'double precision', (c) => c.notNull())
    .addColumn('updated_ms', 'bigint', (c) => c.notNull())
    .addColumn('last_allowed', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}
