import type { Kysely } from 'kysely';

/**
 * A rate limit per tenant beside the one per API key (making keys multiplied a
 * tenant's limit): null = POSTYARD_TENANT_RATE_LIMIT_RPS / _BURST. Set with
 * `postyard tenants set-limits`, like rate_limit_rps / rate_limit_burst (the per-key limit).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tenants').addColumn('tenant_rate_limit_rps', 'integer').execute();
  await db.schema.alterTable('tenants').addColumn('tenant_rate_limit_burst', 'integer').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tenants').dropColumn('tenant_rate_limit_burst').execute();
  await db.schema.alterTable('tenants').dropColumn('tenant_rate_limit_rps').execute();
}
