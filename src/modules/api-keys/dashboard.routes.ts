import type { ApiKeyRoutesDeps } from './api-keys.routes.ts';
import { registerSessionCrudRoutes } from '../../http/crud-routes.ts';
import { SESSION_ROUTE } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { API_KEYS } from './api-keys.routes.ts';
import { SCOPES } from './scopes.ts';

/** The dashboard's API keys page: the scopes a key may have, and the /v1/api-keys use cases. */
export function registerApiKeyDashboardRoutes(app: TypedApp, c: ApiKeyRoutesDeps) {
  app.get('/dashboard/api/scopes', { config: SESSION_ROUTE, schema: { hide: true } }, async () => ({
    scopes: [...SCOPES],
  }));
  registerSessionCrudRoutes(app, c, API_KEYS, '/dashboard/api/api-keys', ['list', 'create', 'delete']);
}
