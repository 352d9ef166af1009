import type { PacingRoutesDeps } from './pacing.routes.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';

/**
 * The dashboard's pacing call (docs/dashboard.md, docs/pacing.md): this tenant's limits per site
 * (override, default, effective) and the active suspensions, read-only; limits are changed with
 * PUT /v1/pacing/sites/{site}. Authenticated by the session, tenant-scoped like /v1/pacing.
 */
const config = SESSION_ROUTE;
const tenant = sessionTenant;

export function registerPacingDashboardRoutes(app: TypedApp, c: PacingRoutesDeps) {
  app.get('/dashboard/api/pacing', { config, schema: { hide: true } }, async (req) => ({
    sites: await c.pacing.listSites(tenant(req)),
    suspensions: await c.pacing.listSuspensions(),
  }));
}
