/** Route-catalog entries of /v1/sending-domains (collected by test/helpers/route-catalog.ts). */
import { createVia, type MakeId, type RouteSpec } from '../helpers/route-spec.ts';

const DOMAINS = ['manage:sending-domains'];

export const sendingDomainId: MakeId = (ctx, t) =>
  createVia(ctx, t, '/v1/sending-domains', { domain: `d${Math.random().toString(36).slice(2, 10)}.example.test` });

export const DOMAIN_ROUTES: RouteSpec[] = [
  { method: 'POST', path: '/v1/sending-domains', scopes: DOMAINS, sampleBody: { domain: 'catalog.example.test' } },
  { method: 'GET', path: '/v1/sending-domains', scopes: DOMAINS },
  { method: 'GET', path: '/v1/sending-domains/:id', scopes: DOMAINS, makeId: sendingDomainId },
  { method: 'DELETE', path: '/v1/sending-domains/:id', scopes: DOMAINS, makeId: sendingDomainId },
  { method: 'POST', path: '/v1/sending-domains/:id/verify', scopes: DOMAINS, makeId: sendingDomainId },
  {
    method: 'PATCH',
    path: '/v1/sending-domains/:id',
    scopes: DOMAINS,
    makeId: sendingDomainId,
    sampleBody: { tracking_hostname: null },
  },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
export const DASHBOARD_ID_CHECKS = [
  { method: 'POST' as const, path: '/dashboard/api/domains/:id/verify', makeId: sendingDomainId },
  { method: 'DELETE' as const, path: '/dashboard/api/domains/:id', makeId: sendingDomainId },
];
