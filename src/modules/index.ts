import type { RouteModule } from '../http/route-module.ts';
import { registerApiKeyRoutes } from './api-keys/api-keys.routes.ts';
import { registerDashboard } from './dashboard/index.ts';
import { registerDomainRoutes } from './domains/domains.routes.ts';
import { registerEventRoutes } from './events/events.routes.ts';
import { registerIpPoolRoutes } from './ip-pools/ip-pools.routes.ts';
import { registerPacingRoutes } from './pacing/pacing.routes.ts';
import { registerSmtpCredentialRoutes } from './smtp-credentials/smtp-credentials.routes.ts';
import { registerSuppressionRoutes } from './suppressions/suppressions.routes.ts';
import { registerTemplateRoutes } from './templates/templates.routes.ts';
import { registerTrackingRoutes } from './tracking/tracking.routes.ts';
import { registerTransmissionRoutes } from './transmissions/transmissions.routes.ts';
import { registerWarmupRoutes } from './warmup/warmup.routes.ts';
import { registerWebhookRoutes } from './webhooks/webhooks.routes.ts';

/**
 * Every feature's HTTP routes, registered by buildApp in this order (the OpenAPI document lists
 * them so). A new module adds its `register...Routes` here, and nowhere else in src/http; its
 * route-catalog entries for the security suite go in test/<module>/routes.ts, its dashboard pages
 * (if any) in src/modules/dashboard/page-list.ts (docs/ARCHITECTURE.md, "Adding a module").
 */
export const FEATURE_MODULES: readonly RouteModule[] = [
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
  registerDashboard,
];
