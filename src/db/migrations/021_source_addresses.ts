import type { Kysely } from 'kysely';

/**
 * Source addresses belong to the operator (docs/ip-pools.md "For the operator").
 * - source_addresses: one row per address the operator said something about. `tenant_id` null:
 *   shared (what an address without a row is too); set: dedicated to that tenant. `warmup_stages`
 *   (JSON, as warmup_policies.stages) with the two rates: the operator's warmup schedule of the
 *   address, null when it has none.
 * - routing_generation: one row, bumped in the transaction of every change that decides where mail
 *   leaves from (pools, their addresses, warmup policies, dedications, the operator's warmup). A
 *   delivery node reads it before each batch and reloads its routing table when it moved, so a
 *   pool created a moment before a send, or an address dedicated a moment ago, is never missed.
 *
 * Existing warmup carries over unchanged: before this migration one policy per address applied to
 * every tenant sending from it (the first pool's, by pool id and position). A tenant's policy may
 * now be attached only to an address dedicated to it, and every address starts shared, so that
 * policy's stages and rates are copied as the operator's schedule of the address: its caps stay as
 * they were, for the same traffic. The operator can then dedicate the address to the tenant (its
 * own policy applies again) or take the schedule off (`postyard addresses warmup --off`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('source_addresses')
    .addColumn('address', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text')
    .addColumn('warmup_stages', 'text')
    .addColumn('max_bounce_rate', 'real')
    .addColumn('max_complaint_rate', 'real')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('routing_generation')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('generation', 'integer', (c) => c.notNull())
    .execute();
  const k = db as Kysely<MigrationDb>;
  await k.insertInto('routing_generation').values({ id: 1, generation: 0 }).execute();
  await carryWarmupOver(k, new Date().toISOString());
}

export async function down(): Promise<void> {
  throw new Error('Migrations are forward-only');
}

interface MigrationDb {
  routing_generation: { id: number; generation: number };
  source_addresses: {
    address: string;
    tenant_id: string | null;
    warmup_stages: string | null;
    max_bounce_rate: number | null;
    max_complaint_rate: number | null;
    updated_at: string;
  };
  ip_pools: { id: string; tenant_id: string };
  ip_pool_addresses: {
    tenant_id: string;
    pool_id: string;
    address: string;
    warmup_policy_id: string | null;
    position: number;
  };
  warmup_policies: {
    id: string;
    tenant_id: string;
    stages: string;
    max_bounce_rate: number;
    max_complaint_rate: number;
  };
}

/**
 * The policy each address was warmed with before (the rule of the routing table then: the first
 * attachment by pool id and position whose policy exists) becomes the operator's schedule of
 * that address. Addresses that already have a row are left alone. Exported for its test.
 */
export async function carryWarmupOver(db: Kysely<MigrationDb>, now: string): Promise<string[]> {
  const attached = await db
    .selectFrom('ip_pool_addresses as a')
    .innerJoin('ip_pools as p', (j) => j.onRef('p.id', '=', 'a.pool_id').onRef('p.tenant_id', '=', 'a.tenant_id'))
    .innerJoin('warmup_policies as w', 'w.id', 'a.warmup_policy_id')
    .select(['a.address', 'w.stages', 'w.max_bounce_rate', 'w.max_complaint_rate'])
    .orderBy('a.pool_id')
    .orderBy('a.position')
    .execute();
  const existing = new Set((await db.selectFrom('source_addresses').select('address').execute()).map((r) => r.address));
  const carried: string[] = [];
  for (const row of attached) {
    if (existing.has(row.address)) continue;
    existing.add(row.address);
    carried.push(row.address);
    await db
      .insertInto('source_addresses')
      .values({
        address: row.address,
        tenant_id: null,
        warmup_stages: row.stages,
        max_bounce_rate: Number(row.max_bounce_rate),
        max_complaint_rate: Number(row.max_complaint_rate),
        updated_at: now,
      })
      .execute();
  }
  return carried;
}
