import type { Executor } from '../../db/executor.ts';
import { poolAddresses, tenantPools } from './ip-pools.repo.ts';
import type { AddressRules } from './source-addresses.ts';
import { stageFor, utcDay, warmupStatus } from '../warmup/ledger.ts';
import type { WarmupStage } from '../warmup/warmup.schema.ts';

export interface WarmupProgressRow {
  pool_id: string;
  pool_name: string;
  address: string;
  policy_id: string;
  policy_name: string;
  /** The warmup day last set (on the address's first send of a UTC date). */
  warmup_day: number;
  /** The UTC date that warmup day was set on; null before the first send. */
  progress_day: string | null;
  /** The stage in force, or null once past the last stage (warmed up). */
  stage: WarmupStage | null;
  sent_today: number;
  sent_this_hour: number;
  bounced_today: number;
  complained_today: number;
  today: string;
}

/**
 * Warmup progress of the tenant's pool addresses whose policy is in force: addresses dedicated to
 * the tenant (a policy on a shared address does not apply, and the counts of a shared address
 * are other tenants' traffic too, which a tenant is not shown). When several of its pools attach
 * a policy to one address, the oldest pool's holds (source-addresses.ts warmupInForce).
 */
export async function warmupProgress(
  db: Executor,
  tenantId: string,
  nowMs: number,
  rules: AddressRules,
  poolId?: string,
): Promise<WarmupProgressRow[]> {
  const pools = await tenantPools(db, tenantId);
  const attached = (
    await poolAddresses(
      db,
      tenantId,
      pools.map((p) => p.id),
    )
  ).filter((m) => m.warmup_policy_id && rules.owners.get(m.address)?.tenantId === tenantId);
  // poolAddresses is ordered by pool id (time-ordered) and position: the first one per address holds.
  const inForce = new Map<string, string>();
  for (const m of attached) if (!inForce.has(m.address)) inForce.set(m.address, m.warmup_policy_id as string);
  const members = attached.filter(
    (m) => inForce.get(m.address) === m.warmup_policy_id && (!poolId || m.pool_id === poolId),
  );
  if (members.length === 0) return [];
  const policyIds = [...new Set(members.map((m) => m.warmup_policy_id as string))];
  const policies = await db
    .selectFrom('warmup_policies')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', policyIds)
    .execute();
  const status = await warmupStatus(db, [...new Set(members.map((m) => m.address))], nowMs);
  const rows: WarmupProgressRow[] = [];
  for (const m of members) {
    const pool = pools.find((p) => p.id === m.pool_id);
    const policy = policies.find((p) => p.id === m.warmup_policy_id);
    const s = status.find((x) => x.address === m.address);
    if (!pool || !policy || !s) continue;
    rows.push({
      pool_id: pool.id,
      pool_name: pool.name,
      address: m.address,
      policy_id: policy.id,
      policy_name: policy.name,
      warmup_day: s.warmup_day,
      progress_day: s.progress_day,
      stage: stageFor(JSON.parse(policy.stages) as WarmupStage[], s.warmup_day),
      sent_today: s.sent_today,
      sent_this_hour: s.sent_this_hour,
      bounced_today: s.bounced_today,
      complained_today: s.complained_today,
      today: utcDay(nowMs),
    });
  }
  return rows;
}
