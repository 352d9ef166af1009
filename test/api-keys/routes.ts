/** Route-catalog entries of /v1/api-keys (collected by test/helpers/route-catalog.ts). */
import { createVia, type MakeId, type RouteSpec } from '../helpers/route-spec.ts';

const KEYS = ['manage:api-keys'];

/** A key with the route's scope only: a key holding just that scope may revoke it (issue 31, item 9). */
export const apiKeyId: MakeId = (ctx, t) =>
  createVia(ctx, t, '/v1/api-keys', { name: 'target', scopes: ['manage:api-keys'] });

export const API_KEY_ROUTES: RouteSpec[] = [
  { method: 'POST', path: '/v1/api-keys', scopes: KEYS, sampleBody: { name: 'k', scopes: ['manage:api-keys'] } },
  { method: 'GET', path: '/v1/api-keys', scopes: KEYS },
  { method: 'DELETE', path: '/v1/api-keys/:id', scopes: KEYS, makeId: apiKeyId },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
export const DASHBOARD_ID_CHECKS = [
  { method: 'DELETE' as const, path: '/dashboard/api/api-keys/:id', makeId: apiKeyId },
];
