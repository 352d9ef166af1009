import type { IpPoolRoutesDeps } from './ip-pools.routes.ts';
import { registerSessionCrudRoutes } from '../../http/crud-routes.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { IdParams } from '../../http/schemas.ts';
import { warmupProgress } from './warmup-progress.ts';
import { IP_POOLS } from './ip-pools.routes.ts';

/**
 * The dashboard's IP pool and warmup calls (docs/dashboard.md): read-only views of the
 * /v1/ip-pools use cases, authenticated by the session, and the warmup progress per address.
 * Pools are changed through the API (docs/ip-pools.md).
 */
const P = '/dashboard/api/ip-pools';
const config = SESSION_ROUTE;
const tenant = sessionTenant;

export function registerIpPoolDashboardRoutes(app: TypedApp, c: IpPoolRoutesDeps) {
  registerSessionCrudRoutes(app, c, IP_POOLS, P, ['list']);
  app.get(`${P}/:id`, { config, schema: { hide: true, params: IdParams } }, async (req) => {
    const pool = await c.ipPools.get(tenant(req), req.params.id);
    const rules = await c.sourceAddresses.rules();
    return { pool, warmup: await warmupProgress(c.database.db, tenant(req), Date.now(), rules, pool.id) };
  });
  app.get('/dashboard/api/warmup', { config, schema: { hide: true } }, async (req) => ({
    data: await warmupProgress(c.database.db, tenant(req), Date.now(), await c.sourceAddresses.rules()),
  }));
}
