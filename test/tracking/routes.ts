import type { RouteSpec } from '../helpers/route-catalog.ts';

/** Route-catalog entries (test/helpers/route-catalog.ts); the public /o, /c, /u routes are not under /v1. */
export const TRACKING_ROUTES: RouteSpec[] = [
  { method: 'GET', path: '/v1/tracking-settings', scopes: ['manage:sending-domains'] },
  {
    method: 'PATCH',
    path: '/v1/tracking-settings',
    scopes: ['manage:sending-domains'],
    sampleBody: { open_tracking: { transactional: false } },
  },
];
