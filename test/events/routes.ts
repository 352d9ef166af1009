/** Route-catalog entries of /v1/events (collected by test/helpers/route-catalog.ts). */
import type { RouteSpec } from '../helpers/route-spec.ts';

export const EVENT_ROUTES: RouteSpec[] = [{ method: 'GET', path: '/v1/events', scopes: ['read:events'] }];
