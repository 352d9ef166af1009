import type { WebhookRoutesDeps } from './webhooks.routes.ts';
import { Type } from '@sinclair/typebox';
import { registerSessionCrudRoutes } from '../../http/crud-routes.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { IdParams, PageQuery, pageQuery } from '../../http/schemas.ts';
import { WEBHOOKS } from './webhooks.routes.ts';

/** The dashboard's webhooks page: the /v1/webhooks use cases, authenticated by the session. */
export function registerWebhookDashboardRoutes(app: TypedApp, c: WebhookRoutesDeps) {
  const P = '/dashboard/api/webhooks';
  const config = SESSION_ROUTE;
  registerSessionCrudRoutes(app, c, WEBHOOKS, P, ['list', 'create', 'update', 'delete']);
  app.post(`${P}/:id/rotate-secret`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.webhooks.rotateSecret(sessionTenant(req), req.params.id),
  );
  app.post(`${P}/:id/test`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.webhooks.test(sessionTenant(req), req.params.id),
  );
  app.get(
    `${P}/:id/deliveries`,
    { config, schema: { hide: true, params: IdParams, querystring: Type.Object(PageQuery) } },
    async (req) => {
      const q = pageQuery(req.query);
      return c.webhooks.deliveries(sessionTenant(req), req.params.id, q.limit, q.cursor);
    },
  );
}
