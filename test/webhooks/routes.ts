/** Route-catalog entries of /v1/webhooks (collected by test/helpers/route-catalog.ts). */
import { createVia, type MakeId, type RouteSpec } from '../helpers/route-spec.ts';

const HOOKS = ['manage:webhooks'];

// Port 9 (discard) on loopback refuses at once, so the test route answers quickly in the suite.
export const webhookId: MakeId = (ctx, t) =>
  createVia(ctx, t, '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['message.delivered'] });

export const WEBHOOK_ROUTES: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/webhooks',
    scopes: HOOKS,
    sampleBody: { url: 'http://127.0.0.1:9/hook', events: ['*'] },
  },
  { method: 'GET', path: '/v1/webhooks', scopes: HOOKS },
  { method: 'GET', path: '/v1/webhooks/:id', scopes: HOOKS, makeId: webhookId },
  { method: 'PATCH', path: '/v1/webhooks/:id', scopes: HOOKS, sampleBody: { name: 'renamed' }, makeId: webhookId },
  { method: 'DELETE', path: '/v1/webhooks/:id', scopes: HOOKS, makeId: webhookId },
  { method: 'POST', path: '/v1/webhooks/:id/rotate-secret', scopes: HOOKS, makeId: webhookId },
  { method: 'POST', path: '/v1/webhooks/:id/test', scopes: HOOKS, makeId: webhookId },
  { method: 'GET', path: '/v1/webhooks/:id/deliveries', scopes: HOOKS, makeId: webhookId },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
const D = '/dashboard/api/webhooks';
export const DASHBOARD_ID_CHECKS = [
  { method: 'PATCH' as const, path: `${D}/:id`, makeId: webhookId, body: { name: 'taken over' } },
  { method: 'DELETE' as const, path: `${D}/:id`, makeId: webhookId },
  { method: 'POST' as const, path: `${D}/:id/rotate-secret`, makeId: webhookId },
  { method: 'POST' as const, path: `${D}/:id/test`, makeId: webhookId },
  { method: 'GET' as const, path: `${D}/:id/deliveries`, makeId: webhookId },
];
