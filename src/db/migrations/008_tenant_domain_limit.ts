import type { Kysely } from 'kysely';

/**
 * Per-tenant cap on sending domains (each one costs an RSA key generation and DNS checks):
 * null = POSTYARD_MAX_DOMAINS_PER_TENANT, like rate_limit_rps / rate_limit_burst beside it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tenants').addColumn('max_sending_domains', 'integer').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tenants').dropColumn('max_sending_domains').execute();
}
