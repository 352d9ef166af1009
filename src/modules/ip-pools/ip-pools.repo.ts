import type { Executor } from '../../db/executor.ts';
import type { IpPoolAddressesTable, IpPoolsTable } from '../../db/schema.ts';
import { isUuid } from '../../lib/ids.ts';

/** IP pool rows and their addresses. Every query is scoped by tenant_id first. */

export async function findPool(db: Executor, tenantId: string, id: string): Promise<IpPoolsTable | undefined> {
  if (!isUuid(id)) return undefined;
  return db
    .selectFrom('ip_pools')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findPoolByName(db: Executor, tenantId: string, name: string): Promise<IpPoolsTable | undefined> {
  return db
    .selectFrom('ip_pools')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
}

export async function tenantPools(db: Executor, tenantId: string): Promise<IpPoolsTable[]> {
  return db.selectFrom('ip_pools').selectAll().where('tenant_id', '=', tenantId).execute();
}

export async function poolAddresses(
  db: Executor,
  tenantId: string,
  poolIds: readonly string[],
): Promise<IpPoolAddressesTable[]> {
  if (poolIds.length === 0) return [];
  return db
    .selectFrom('ip_pool_addresses')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('pool_id', 'in', poolIds)
    .orderBy('pool_id')
    .orderBy('position')
    .execute();
}

export async function replaceAddresses(
  db: Executor,
  tenantId: string,
  poolId: string,
  rows: Omit<IpPoolAddressesTable, 'tenant_id' | 'pool_id' | 'position'>[],
): Promise<void> {
  await db.deleteFrom('ip_pool_addresses').where('tenant_id', '=', tenantId).where('pool_id', '=', poolId).execute();
  if (rows.length === 0) return;
  await db
    .insertInto('ip_pool_addresses')
    .values(rows.map((r, position) => ({ ...r, tenant_id: tenantId, pool_id: poolId, position })))
    .execute();
}

/** Every pool with its addresses, for the delivery side's routing table (all tenants). */
export async function allPoolsForRouting(db: Executor) {
  const [pools, addresses] = await Promise.all([
    db
      .selectFrom('ip_pools')
      .select(['tenant_id', 'id', 'name', 'overflow_pool_id', 'is_default', 'mail_types'])
      .execute(),
    db
      .selectFrom('ip_pool_addresses')
      .select(['tenant_id', 'pool_id', 'address', 'weight', 'warmup_policy_id', 'position'])
      .orderBy('pool_id')
      .orderBy('position')
      .execute(),
  ]);
  return { pools, addresses };
}
