import type { Executor } from '../../db/executor.ts';
import type { PacingSiteOverridesTable, PacingSuspensionsTable } from '../../db/schema.ts';

/** Pacing rows (migration 015). Overrides are tenant-owned (tenant first); suspensions are not. */
export type OverrideRow = PacingSiteOverridesTable;
export type SuspensionRow = PacingSuspensionsTable;

export async function getOverride(db: Executor, tenantId: string, site: string): Promise<OverrideRow | undefined> {
  return db
    .selectFrom('pacing_site_overrides')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('site', '=', site)
    .executeTakeFirst();
}

/** Every override (the worker's in-memory copy; small: tenants x sites they changed). */
export async function allOverrides(db: Executor, max: number): Promise<OverrideRow[]> {
  return db.selectFrom('pacing_site_overrides').selectAll().limit(max).execute();
}

/** Writes the tenant's override; all limits null removes it (back to the shipped defaults). */
export async function putOverride(db: Executor, row: OverrideRow): Promise<void> {
  const empty =
    row.max_connections === null &&
    row.messages_per_connection === null &&
    row.messages_per_minute === null &&
    row.messages_per_hour === null;
  await db
    .deleteFrom('pacing_site_overrides')
    .where('tenant_id', '=', row.tenant_id)
    .where('site', '=', row.site)
    .execute();
  if (!empty) await db.insertInto('pacing_site_overrides').values(row).execute();
}

export async function activeSuspensions(db: Executor, nowIso: string): Promise<SuspensionRow[]> {
  return db
    .selectFrom('pacing_suspensions')
    .selectAll()
    .where('until', '>', nowIso)
    .orderBy('until', 'desc')
    .orderBy('site')
    .orderBy('source_address')
    .limit(10_000)
    .execute();
}

/**
 * Starts or extends a suspension: a later `until` wins, an earlier one never shortens it (two
 * nodes seeing the same reply write the same row).
 */
export async function upsertSuspension(db: Executor, row: SuspensionRow): Promise<void> {
  await db
    .insertInto('pacing_suspensions')
    .values(row)
    .onConflict((oc) =>
      oc
        .columns(['site', 'source_address'])
        .doUpdateSet((eb) => ({
          action: eb.ref('excluded.action'),
          factor: eb.ref('excluded.factor'),
          rule: eb.ref('excluded.rule'),
          reason: eb.ref('excluded.reason'),
          started_at: eb.ref('excluded.started_at'),
          until: eb.ref('excluded.until'),
        }))
        .where('pacing_suspensions.until', '<', row.until),
    )
    .execute();
}

/** Suspensions whose time is up, past a day (kept that long for the dashboard's history). */
export async function pruneSuspensions(db: Executor, beforeIso: string): Promise<void> {
  await db.deleteFrom('pacing_suspensions').where('until', '<', beforeIso).execute();
}
