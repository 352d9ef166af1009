import type { DomainRoutesDeps } from './domains.routes.ts';
import { registerSessionCrudRoutes } from '../../http/crud-routes.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { IdParams } from '../../http/schemas.ts';
import { SENDING_DOMAINS } from './domains.routes.ts';

/** The dashboard's sending domains page: the /v1/sending-domains use cases, authenticated by the session. */
export function registerDomainDashboardRoutes(app: TypedApp, c: DomainRoutesDeps) {
  const P = '/dashboard/api/domains';
  registerSessionCrudRoutes(app, c, SENDING_DOMAINS, P, ['list', 'create', 'delete']);
  app.post(`${P}/:id/verify`, { config: SESSION_ROUTE, schema: { hide: true, params: IdParams } }, async (req) =>
    c.domains.verify(sessionTenant(req), req.params.id),
  );
}
