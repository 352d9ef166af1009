import type { Updateable } from 'kysely';
import type { Executor } from '../../db/executor.ts';
import type { SendingDomainsTable } from '../../db/schema.ts';

export async function insertDomain(db: Executor, row: SendingDomainsTable): Promise<void> {
  await db.insertInto('sending_domains').values(row).execute();
}

export async function findDomain(db: Executor, tenantId: string, id: string): Promise<SendingDomainsTable | undefined> {
  return db
    .selectFrom('sending_domains')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findDomainByName(
  db: Executor,
  tenantId: string,
  domain: string,
): Promise<SendingDomainsTable | undefined> {
  return db
    .selectFrom('sending_domains')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('domain', '=', domain)
    .executeTakeFirst();
}

/** The tenant's domains among `names` (the From domain and its parents), optionally only verified. */
export async function findDomainsNamed(
  db: Executor,
  tenantId: string,
  names: string[],
  onlyVerified: boolean,
): Promise<SendingDomainsTable[]> {
  if (names.length === 0) return [];
  let q = db.selectFrom('sending_domains').selectAll().where('tenant_id', '=', tenantId).where('domain', 'in', names);
  if (onlyVerified) q = q.where('status', '=', 'verified');
  return q.execute();
}

/** Every tenant's domains among `names` (tenant and records only), optionally only verified. */
export async function findDomainsOfAnyTenant(
  db: Executor,
  names: string[],
  onlyVerified: boolean,
): Promise<Pick<SendingDomainsTable, 'tenant_id' | 'records'>[]> {
  if (names.length === 0) return [];
  let q = db.selectFrom('sending_domains').select(['tenant_id', 'records']).where('domain', 'in', names);
  if (onlyVerified) q = q.where('status', '=', 'verified');
  return q.execute();
}

export async function listVerifiedDomainNames(db: Executor, tenantId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('sending_domains')
    .select('domain')
    .where('tenant_id', '=', tenantId)
    .where('status', '=', 'verified')
    .execute();
  return rows.map((r) => r.domain);
}

/** Another tenant holding `domain` verified, if any. */
export async function findVerifiedOwner(
  db: Executor,
  domain: string,
  exceptTenantId: string,
): Promise<{ tenant_id: string } | undefined> {
  return db
    .selectFrom('sending_domains')
    .select('tenant_id')
    .where('domain', '=', domain)
    .where('status', '=', 'verified')
    .where('tenant_id', '!=', exceptTenantId)
    .executeTakeFirst();
}

export async function updateDomain(
  db: Executor,
  tenantId: string,
  id: string,
  set: Updateable<SendingDomainsTable>,
): Promise<boolean> {
  const res = await db
    .updateTable('sending_domains')
    .set(set)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

/** Hard delete: the key material goes with the row. Returns false if absent. */
export async function deleteDomain(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const res = await db
    .deleteFrom('sending_domains')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

export async function countDomains(db: Executor, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('sending_domains')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** The tenant's own cap on sending domains (tenants.max_sending_domains), null = the default. */
export async function findDomainLimit(db: Executor, tenantId: string): Promise<number | null> {
  const row = await db
    .selectFrom('tenants')
    .select('max_sending_domains')
    .where('id', '=', tenantId)
    .executeTakeFirst();
  return row?.max_sending_domains ?? null;
}

/**
 * Serializes domain creations of one tenant until the transaction ends, so a count-then-insert
 * cannot go past the cap: a no-op UPDATE takes the tenant row's lock on PostgreSQL (SQLite
 * already has one writer at a time).
 */
export async function lockTenant(db: Executor, tenantId: string): Promise<void> {
  await db
    .updateTable('tenants')
    .set((eb) => ({ id: eb.ref('id') }))
    .where('id', '=', tenantId)
    .execute();
}
