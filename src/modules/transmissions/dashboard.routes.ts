import type { TransmissionsService } from './transmissions.service.ts';
import type { Database } from '../../db/index.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { IdParams } from '../../http/schemas.ts';
import { messageEngagement } from '../events/engagement.ts';

/** What the dashboard's message and transmission pages need. */
export interface TransmissionDashboardDeps {
  database: Database;
  transmissions: Pick<TransmissionsService, 'get' | 'getMessage'>;
}

/** The dashboard's message page (with its opens and clicks) and the transmission it belongs to. */
export function registerTransmissionDashboardRoutes(app: TypedApp, c: TransmissionDashboardDeps) {
  const config = SESSION_ROUTE;
  app.get('/dashboard/api/messages/:id', { config, schema: { hide: true, params: IdParams } }, async (req) => {
    const tenantId = sessionTenant(req);
    const m = await c.transmissions.getMessage(tenantId, req.params.id); // 404 first: another tenant's id
    return { ...m, engagement: await messageEngagement(c.database.db, tenantId, req.params.id) };
  });
  app.get('/dashboard/api/transmissions/:id', { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.transmissions.get(sessionTenant(req), req.params.id),
  );
}
