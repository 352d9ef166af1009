import type { Container } from '../../container.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { pageQuery } from '../../http/schemas.ts';
import { EventsQuery } from './events.schema.ts';

/** The dashboard's activity page: GET /v1/events for the signed-in session's tenant. */
export function registerEventDashboardRoutes(app: TypedApp, c: Container) {
  app.get(
    '/dashboard/api/events',
    { config: SESSION_ROUTE, schema: { hide: true, querystring: EventsQuery } },
    async (req) => c.events.list(sessionTenant(req), pageQuery(req.query)),
  );
}
