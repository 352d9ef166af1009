import type { Container } from '../container.ts';
import type { RouteModule } from '../http/route-module.ts';
import { registerApiKeyDashboardRoutes } from './api-keys/dashboard.routes.ts';
import { registerApiKeyRoutes } from './api-keys/api-keys.routes.ts';
import { registerDashboardAuthRoutes } from './dashboard/auth.routes.ts';
import { registerDashboard } from './dashboard/index.ts';
import { registerDashboardStatsRoutes } from './dashboard/stats.routes.ts';
import { registerDomainDashboardRoutes } from './domains/dashboard.routes.ts';
import { registerDomainRoutes } from './domains/domains.routes.ts';
import { registerEventDashboardRoutes } from './events/dashboard.routes.ts';
import { registerEventRoutes } from './events/events.routes.ts';
import { registerIpPoolDashboardRoutes } from './ip-pools/dashboard.routes.ts';
import { registerIpPoolRoutes } from './ip-pools/ip-pools.routes.ts';
import { registerPacingDashboardRoutes } from './pacing/dashboard.routes.ts';
import { registerPacingRoutes } from './pacing/pacing.routes.ts';
import { registerSmtpCredentialDashboardRoutes } from './smtp-credentials/dashboard.routes.ts';
import { registerSmtpCredentialRoutes } from './smtp-credentials/smtp-credentials.routes.ts';
import { registerSuppressionDashboardRoutes } from './suppressions/dashboard.routes.ts';
import { registerSuppressionRoutes } from './suppressions/suppressions.routes.ts';
import { registerTemplateDashboardRoutes } from './templates/dashboard.routes.ts';
import { registerTemplateRoutes } from './templates/templates.routes.ts';
import { registerTrackingRoutes } from './tracking/tracking.routes.ts';
import { registerTransmissionDashboardRoutes } from './transmissions/dashboard.routes.ts';
import { registerTransmissionRoutes } from './transmissions/transmissions.routes.ts';
import { registerWarmupRoutes } from './warmup/warmup.routes.ts';
import { registerWebhookDashboardRoutes } from './webhooks/dashboard.routes.ts';
import { registerWebhookRoutes } from './webhooks/webhooks.routes.ts';

/**
 * Every feature's dashboard JSON routes (under /dashboard/api, each in its module's
 * dashboard.routes.ts), registered in this order inside the dashboard's session scope: a
 * signed-in session authenticates them (src/http/dashboard-session.ts), never a bearer key.
 */
export const DASHBOARD_ROUTES: readonly RouteModule<Container>[] = [
  registerDashboardAuthRoutes,
  registerDashboardStatsRoutes,
  registerEventDashboardRoutes,
  registerTransmissionDashboardRoutes,
  registerApiKeyDashboardRoutes,
  registerSmtpCredentialDashboardRoutes,
  registerWebhookDashboardRoutes,
  registerSuppressionDashboardRoutes,
  registerDomainDashboardRoutes,
  registerTemplateDashboardRoutes,
  registerIpPoolDashboardRoutes,
  registerPacingDashboardRoutes,
];

/**
 * Every feature's HTTP routes, registered by buildApp in this order (the OpenAPI document lists
 * them so). A new module adds its `register...Routes` here, and nowhere else in src/http; its
 * dashboard JSON routes (if any) to DASHBOARD_ROUTES above; its route-catalog entries for the
 * security suite go in test/<module>/routes.ts, its dashboard pages (if any) in
 * src/modules/dashboard/page-list.ts (docs/ARCHITECTURE.md, "Adding a module").
 */
export const FEATURE_MODULES: readonly RouteModule<Container>[] = [
  registerApiKeyRoutes,
  registerSmtpCredentialRoutes,
  registerSuppressionRoutes,
  registerTransmissionRoutes,
  registerEventRoutes,
  registerWebhookRoutes,
  registerDomainRoutes,
  registerTemplateRoutes,
  registerTrackingRoutes,
  registerIpPoolRoutes,
  registerWarmupRoutes,
  registerPacingRoutes,
  registerDashboard(DASHBOARD_ROUTES),
];
