import type { Container } from '../container.ts';

/**
 * Per-tenant rate-limit overrides (tenants.rate_limit_rps / rate_limit_burst), cached for 5 s so
 * the rate limiter adds no database read per request.
 */
export function registerTenantLimitCache(c: Container) {
  const cache = new Map<string, { value: { rps: number; burst: number } | null; expires: number }>();
  return async (tenantId: string) => {
    const now = Date.now();
    const hit = cache.get(tenantId);
    if (hit && hit.expires > now) return hit.value;
    const row = await c.database.db
      .selectFrom('tenants')
      .select(['rate_limit_rps', 'rate_limit_burst'])
      .where('id', '=', tenantId)
      .executeTakeFirst();
    const value =
      row && (row.rate_limit_rps !== null || row.rate_limit_burst !== null)
        ? {
            rps: row.rate_limit_rps ?? c.config.rateLimitRps,
            burst: row.rate_limit_burst ?? c.config.rateLimitBurst,
          }
        : null;
    if (cache.size > 10_000) cache.clear();
    cache.set(tenantId, { value, expires: now + 5000 });
    return value;
  };
}
