import type { EventsService } from './events.service.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { pageQuery } from '../../http/schemas.ts';
import { EventsQuery } from './events.schema.ts';

/** What the dashboard's event routes need. */
export interface EventDashboardDeps {
  events: Pick<EventsService, 'list'>;
}

/** The dashboard's activity page: GET /v1/events for the signed-in session's tenant. */
export function registerEventDashboardRoutes(app: TypedApp, c: EventDashboardDeps) {
  app.get(
    '/dashboard/api/events',
    { config: SESSION_ROUTE, schema: { hide: true, querystring: EventsQuery } },
    async (req) => c.events.list(sessionTenant(req), pageQuery(req.query)),
  );
}
