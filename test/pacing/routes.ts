import type { RouteSpec } from '../helpers/route-catalog.ts';

const SCOPES = ['manage:pacing'];
/** Sites are the pacing file's names, shared by every tenant (each has its own overrides). */
const site = async () => ({ site: 'gmail' });

/** Route-catalog entries (test/helpers/route-catalog.ts) for /v1/pacing (docs/api.md "Pacing"). */
export const PACING_ROUTES: RouteSpec[] = [
  { method: 'GET', path: '/v1/pacing/sites', scopes: SCOPES },
  { method: 'GET', path: '/v1/pacing/sites/:site', scopes: SCOPES, makeId: site, sharedParam: true },
  {
    method: 'PUT',
    path: '/v1/pacing/sites/:site',
    scopes: SCOPES,
    sampleBody: { messages_per_minute: 100, messages_per_hour: null },
    makeId: site,
    sharedParam: true,
  },
  { method: 'GET', path: '/v1/pacing/suspensions', scopes: SCOPES },
];
