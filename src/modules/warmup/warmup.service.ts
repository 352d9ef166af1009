import type { Database } from '../../db/index.ts';
import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { WarmupPoliciesTable } from '../../db/schema.ts';
import { writeNamed } from '../../db/unique-violation.ts';
import { nowIso } from '../../lib/clock.ts';
import { AppError, notFound, validationError } from '../../lib/errors.ts';
import { isUuid, newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { bumpRoutingGeneration } from '../../db/routing-generation.ts';
import type { CreateWarmupInput, UpdateWarmupInput, WarmupPolicyView, WarmupStage } from './warmup.schema.ts';

/** The resource as name_taken names it. */
const POLICY = 'a warmup policy';

/** Stages sorted by day; days must be distinct and the first stage must start on day 1. */
/**
 * Rates are kept to six decimal places (0.0001 %). Both stores take them as 4-byte `real` on
 * PostgreSQL, which refuses values below about 1e-38 ("underflow") with an error: a threshold of
 * 5e-324 answered 500. Rounding makes every accepted value storable and what is read back equal to
 * what was stored.
 */
export const keptRate = (rate: number): number => Math.round(rate * 1e6) / 1e6;

export function checkStages(stages: readonly WarmupStage[] | CreateWarmupInput['stages']): WarmupStage[] {
  const sorted = stages
    .map((s) => ({ day: s.day, daily_limit: s.daily_limit, hourly_limit: s.hourly_limit ?? null }))
    .sort((a, b) => a.day - b.day);
  const problems: { field: string; message: string }[] = [];
  if (sorted[0] && sorted[0].day !== 1) problems.push({ field: 'stages', message: 'the first stage must be day 1' });
  sorted.forEach((s, i) => {
    if (i > 0 && sorted[i - 1]?.day === s.day)
      problems.push({ field: 'stages', message: `day ${s.day} appears more than once` });
    if (s.hourly_limit !== null && s.hourly_limit > s.daily_limit)
      problems.push({ field: 'stages', message: `day ${s.day}: hourly_limit is above daily_limit` });
  });
  if (problems.length) throw validationError(problems);
  return sorted;
}

export function toPolicyView(r: WarmupPoliciesTable): WarmupPolicyView {
  return {
    id: r.id,
    name: r.name,
    stages: JSON.parse(r.stages) as WarmupStage[],
    max_bounce_rate: Number(r.max_bounce_rate),
    max_complaint_rate: Number(r.max_complaint_rate),
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

export async function findPolicy(db: Executor, tenantId: string, id: string) {
  if (!isUuid(id)) return undefined;
  return db
    .selectFrom('warmup_policies')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Warmup policies (scope manage:pacing): stages of daily/hourly limits for pool addresses. */
export class WarmupPoliciesService {
  constructor(
    private readonly database: Database,
    private readonly cursors: CursorCodec,
  ) {}

  private get db() {
    return this.database.db;
  }

  async create(db: Executor, tenantId: string, input: CreateWarmupInput): Promise<WarmupPolicyView> {
    const stages = checkStages(input.stages);
    const now = nowIso();
    const row: WarmupPoliciesTable = {
      tenant_id: tenantId,
      id: newId(),
      name: input.name?.trim() || `warmup ${now}`,
      stages: JSON.stringify(stages),
      max_bounce_rate: keptRate(input.max_bounce_rate),
      max_complaint_rate: keptRate(input.max_complaint_rate),
      created_at: now,
      updated_at: now,
    };
    await writeNamed(POLICY, () => db.insertInto('warmup_policies').values(row).execute());
    return toPolicyView(row);
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<WarmupPolicyView>> {
    return newestFirstPage(
      this.db,
      'warmup_policies',
      tenantId,
      { limit, cursor, cursors: this.cursors },
      toPolicyView,
    );
  }

  async get(tenantId: string, id: string): Promise<WarmupPolicyView> {
    const row = await findPolicy(this.db, tenantId, id);
    if (!row) throw notFound('Warmup policy');
    return toPolicyView(row);
  }

  async update(tenantId: string, id: string, input: UpdateWarmupInput): Promise<WarmupPolicyView> {
    return this.db.transaction().execute(async (trx) => {
      const row = await findPolicy(trx, tenantId, id);
      if (!row) throw notFound('Warmup policy');
      const next: WarmupPoliciesTable = {
        ...row,
        ...(input.name !== undefined ? { name: input.name.trim() } : {}),
        ...(input.stages !== undefined ? { stages: JSON.stringify(checkStages(input.stages)) } : {}),
        ...(input.max_bounce_rate !== undefined ? { max_bounce_rate: keptRate(input.max_bounce_rate) } : {}),
        ...(input.max_complaint_rate !== undefined ? { max_complaint_rate: keptRate(input.max_complaint_rate) } : {}),
        updated_at: nowIso(),
      };
      await writeNamed(POLICY, () =>
        trx
          .updateTable('warmup_policies')
          .set({
            name: next.name,
            stages: next.stages,
            max_bounce_rate: next.max_bounce_rate,
            max_complaint_rate: next.max_complaint_rate,
            updated_at: next.updated_at,
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .execute(),
      );
      // Delivery nodes reload the stages before their next batch (src/modules/ip-pools/routing-generation.ts).
      await bumpRoutingGeneration(trx);
      return toPolicyView(next);
    });
  }

  /** A policy still attached to a pool address is 409 in_use: detaching it would lift the caps. */
  async delete(tenantId: string, id: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const row = await findPolicy(trx, tenantId, id);
      if (!row) throw notFound('Warmup policy');
      const used = await trx
        .selectFrom('ip_pool_addresses')
        .select('pool_id')
        .where('tenant_id', '=', tenantId)
        .where('warmup_policy_id', '=', id)
        .executeTakeFirst();
      if (used)
        throw new AppError('in_use', 'the policy is attached to pool addresses; detach it from every pool first');
      await trx.deleteFrom('warmup_policies').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
    });
  }
}
