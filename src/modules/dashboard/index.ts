import type { Container } from '../../container.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { registerDashboardApiRoutes } from './api.routes.ts';
import { registerDashboardAuthRoutes } from './auth.routes.ts';
import { registerDashboardPages } from './pages.ts';
import { installDashboardSession } from './session.plugin.ts';
import { registerTemplateDashboardRoutes } from '../templates/dashboard.routes.ts';
import { registerIpPoolDashboardRoutes } from '../ip-pools/dashboard.routes.ts';
import { registerPacingDashboardRoutes } from '../pacing/dashboard.routes.ts';

/**
 * The web dashboard (docs/dashboard.md): its pages and its JSON API under /dashboard/api, in an
 * encapsulated plugin so the session hook never runs for /v1 (which accepts only bearer keys).
 */
export async function registerDashboard(app: TypedApp, c: Container) {
  await app.register(async (child) => {
    installDashboardSession(child, c.dashboard);
    registerDashboardAuthRoutes(child, c);
    registerDashboardApiRoutes(child, c);
    registerTemplateDashboardRoutes(child, c);
    registerIpPoolDashboardRoutes(child, c);
    registerPacingDashboardRoutes(child, c);
    await registerDashboardPages(child);
  });
}
