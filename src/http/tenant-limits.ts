import type { Config } from '../config.ts';
import type { Database } from '../db/index.ts';
import { BoundedCache } from '../lib/bounded-cache.ts';
import type { BucketParams } from '../rate-limit/rate-limiter.ts';

/** The limits in force for one tenant's requests: per API key, and for all its keys together. */
export interface TenantRateLimits {
  key: BucketParams;
  tenant: BucketParams;
}

/**
 * Rate limits per tenant, cached for 5 s so the rate limiter adds no database read per request:
 * tenants.rate_limit_rps / rate_limit_burst override the per-key limit, tenants.tenant_rate_limit_*
 * the per-tenant one (`postyard tenants set-limits`); null columns take the configured defaults.
 */
export function registerTenantLimitCache(c: {
  config: Pick<Config, 'rateLimitRps' | 'rateLimitBurst' | 'tenantRateLimitRps' | 'tenantRateLimitBurst'>;
  database: Database;
}) {
  const cache = new BoundedCache<string, { value: TenantRateLimits; expires: number }>(10_000);
  const cfg = c.config;
  return async (tenantId: string): Promise<TenantRateLimits> => {
    const now = Date.now();
    const hit = cache.get(tenantId);
    if (hit && hit.expires > now) return hit.value;
    const row = await c.database.db
      .selectFrom('tenants')
      .select(['rate_limit_rps', 'rate_limit_burst', 'tenant_rate_limit_rps', 'tenant_rate_limit_burst'])
      .where('id', '=', tenantId)
      .executeTakeFirst();
    const value: TenantRateLimits = {
      key: { rps: row?.rate_limit_rps ?? cfg.rateLimitRps, burst: row?.rate_limit_burst ?? cfg.rateLimitBurst },
      tenant: {
        rps: row?.tenant_rate_limit_rps ?? cfg.tenantRateLimitRps,
        burst: row?.tenant_rate_limit_burst ?? cfg.tenantRateLimitBurst,
      },
    };
    cache.set(tenantId, { value, expires: now + 5000 });
    return value;
  };
}
