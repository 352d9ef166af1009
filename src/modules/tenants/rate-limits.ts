import type { Database } from '../../db/index.ts';
import { notFound, validationError } from '../../lib/errors.ts';

/** What `postyard tenants set-limits` changes; null = back to the configured default, absent = unchanged. */
export interface RateLimitPatch {
  keyRps?: number | null;
  keyBurst?: number | null;
  tenantRps?: number | null;
  tenantBurst?: number | null;
}

const MAX = 10_000_000;

/**
 * Sets a tenant's rate limits: per API key (tenants.rate_limit_*) and for all its keys together
 * (tenants.tenant_rate_limit_*). Every node sees the change within 5 s (src/http/tenant-limits.ts).
 */
export async function setTenantRateLimits(database: Database, tenantId: string, patch: RateLimitPatch) {
  const errors: { field: string; message: string }[] = [];
  for (const [field, v] of Object.entries(patch)) {
    if (v !== null && v !== undefined && (!Number.isInteger(v) || v < 0 || v > MAX)) {
      errors.push({ field, message: `${field} must be an integer from 0 to ${MAX} (0 = no limit)` });
    }
  }
  if (errors.length) throw validationError(errors);
  const set = {
    ...(patch.keyRps !== undefined ? { rate_limit_rps: patch.keyRps } : {}),
    ...(patch.keyBurst !== undefined ? { rate_limit_burst: patch.keyBurst } : {}),
    ...(patch.tenantRps !== undefined ? { tenant_rate_limit_rps: patch.tenantRps } : {}),
    ...(patch.tenantBurst !== undefined ? { tenant_rate_limit_burst: patch.tenantBurst } : {}),
  };
  const db = database.db;
  if (Object.keys(set).length) await db.updateTable('tenants').set(set).where('id', '=', tenantId).execute();
  const row = await db
    .selectFrom('tenants')
    .select(['id', 'rate_limit_rps', 'rate_limit_burst', 'tenant_rate_limit_rps', 'tenant_rate_limit_burst'])
    .where('id', '=', tenantId)
    .executeTakeFirst();
  if (!row) throw notFound('Tenant');
  return row;
}
