import type { Kysely } from 'kysely';

/**
 * What an attempt's TLS amounted to (docs/operations.md "Outbound TLS"), shown
 * by GET /v1/messages/{id}:
 * - tls_verified: 1 when the certificate verified (trusted chain, host name), 0 when it did not,
 *   null without TLS (and on attempts recorded before this migration).
 * - mta_sts: the recipient domain's MTA-STS policy mode at the time ('enforce', 'testing',
 *   'none'), null when it had none (or for a relay).
 * Nullable additions only: old rows stay valid and nothing is rewritten.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('delivery_attempts').addColumn('tls_verified', 'integer').execute();
  await db.schema.alterTable('delivery_attempts').addColumn('mta_sts', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('delivery_attempts').dropColumn('mta_sts').execute();
  await db.schema.alterTable('delivery_attempts').dropColumn('tls_verified').execute();
}
