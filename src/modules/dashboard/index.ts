import { installDashboardSession } from '../../http/dashboard-session.ts';
import type { RouteModule } from '../../http/route-module.ts';
import type { DashboardAccounts } from './accounts.service.ts';
import { registerDashboardPages } from './pages.ts';
import { signInRedirect } from './sign-in-cookies.ts';

/**
 * The web dashboard (docs/dashboard.md): its pages and every feature's JSON routes under
 * /dashboard/api (`routes`, the list DASHBOARD_ROUTES in src/modules/index.ts), in one
 * encapsulated plugin so the session guard (src/http/dashboard-session.ts) never runs for /v1
 * (which accepts only bearer keys).
 */
export function registerDashboard<D extends { dashboard: DashboardAccounts }>(
  routes: readonly RouteModule<D>[],
): RouteModule<D> {
  return async (app, c) => {
    await app.register(async (child) => {
      installDashboardSession(child, c.dashboard, signInRedirect);
      for (const register of routes) await register(child, c);
      await registerDashboardPages(child);
    });
  };
}
