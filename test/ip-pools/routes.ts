/**
 * Route-catalog entries for /v1/ip-pools and /v1/warmup-policies (test/helpers/route-catalog.ts
 * format), run through the shared security suite by security.test.ts and the central catalog.
 */
import { newId } from '../../src/lib/ids.ts';
import type { MakeId, RouteSpec } from '../helpers/route-catalog.ts';

const POOLS = ['manage:ip-pools'];
const PACING = ['manage:pacing'];

/**
 * A pool of the tenant, written straight to the database: the suites' contexts configure no
 * source addresses (so POST answers 422 there), and isolation only needs a real row.
 */
export const poolId: MakeId = async (ctx, t) => {
  const id = newId();
  const now = new Date().toISOString();
  await ctx.c.database.db
    .insertInto('ip_pools')
    .values({
      tenant_id: t.tenantId,
      id,
      name: `catalog-${id}`,
      overflow_pool_id: null,
      is_default: 0,
      mail_types: '[]',
      created_at: now,
      updated_at: now,
    })
    .execute();
  await ctx.c.database.db
    .insertInto('ip_pool_addresses')
    .values({
      tenant_id: t.tenantId,
      pool_id: id,
      address: '127.0.0.2',
      weight: 1,
      warmup_policy_id: null,
      position: 0,
    })
    .execute();
  return id;
};

export const warmupPolicyId: MakeId = async (ctx, t) => {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/v1/warmup-policies',
    headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({
      name: `catalog-${Math.random().toString(36).slice(2, 10)}`,
      stages: [{ day: 1, daily_limit: 50 }],
      max_bounce_rate: 0.05,
      max_complaint_rate: 0.001,
    }),
  });
  if (res.statusCode !== 201)
    throw new Error(`makeId: POST /v1/warmup-policies answered ${res.statusCode}: ${res.body}`);
  return (res.json() as { id: string }).id;
};

export const IP_POOL_ROUTES: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/ip-pools',
    scopes: POOLS,
    sampleBody: { name: 'catalog sample', addresses: [{ address: '127.0.0.2', weight: 1 }] },
  },
  { method: 'GET', path: '/v1/ip-pools', scopes: POOLS },
  { method: 'GET', path: '/v1/ip-pools/:id', scopes: POOLS, makeId: poolId },
  { method: 'PATCH', path: '/v1/ip-pools/:id', scopes: POOLS, sampleBody: { default: true }, makeId: poolId },
  { method: 'DELETE', path: '/v1/ip-pools/:id', scopes: POOLS, makeId: poolId },
];

export const WARMUP_ROUTES: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/warmup-policies',
    scopes: PACING,
    sampleBody: { stages: [{ day: 1, daily_limit: 20 }], max_bounce_rate: 0.05, max_complaint_rate: 0.001 },
  },
  { method: 'GET', path: '/v1/warmup-policies', scopes: PACING },
  { method: 'GET', path: '/v1/warmup-policies/:id', scopes: PACING, makeId: warmupPolicyId },
  {
    method: 'PATCH',
    path: '/v1/warmup-policies/:id',
    scopes: PACING,
    sampleBody: { max_bounce_rate: 0.02 },
    makeId: warmupPolicyId,
  },
  { method: 'DELETE', path: '/v1/warmup-policies/:id', scopes: PACING, makeId: warmupPolicyId },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
export const DASHBOARD_ID_CHECKS = [{ method: 'GET' as const, path: '/dashboard/api/ip-pools/:id', makeId: poolId }];
