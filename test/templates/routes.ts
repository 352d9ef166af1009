/**
 * Route-catalog entries for /v1/templates (test/helpers/route-catalog.ts format), run through the
 * shared security suite by security.test.ts and spread into the central catalog.
 */
import type { MakeId, RouteSpec } from '../helpers/route-catalog.ts';

const TPL = ['manage:templates'];

/** Creates a template of the tenant and returns its id. */
export const templateId: MakeId = async (ctx, t) => {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/v1/templates',
    headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({
      name: `catalog-${Math.random().toString(36).slice(2, 10)}`,
      subject: 'Hello {{name}}',
      text: 'Hi {{name}}',
    }),
  });
  if (res.statusCode !== 201) throw new Error(`makeId: POST /v1/templates answered ${res.statusCode}: ${res.body}`);
  return (res.json() as { id: string }).id;
};

export const TEMPLATE_ROUTES: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/templates',
    scopes: TPL,
    sampleBody: { name: 'catalog sample', subject: 's', text: 't' },
  },
  { method: 'GET', path: '/v1/templates', scopes: TPL },
  { method: 'GET', path: '/v1/templates/:id', scopes: TPL, makeId: templateId },
  { method: 'PATCH', path: '/v1/templates/:id', scopes: TPL, sampleBody: { subject: 'new' }, makeId: templateId },
  { method: 'DELETE', path: '/v1/templates/:id', scopes: TPL, makeId: templateId },
  { method: 'POST', path: '/v1/templates/:id/publish', scopes: TPL, makeId: templateId },
  { method: 'GET', path: '/v1/templates/:id/versions', scopes: TPL, makeId: templateId },
  {
    method: 'POST',
    path: '/v1/templates/:id/preview',
    scopes: TPL,
    sampleBody: { substitution_data: { name: 'Ann' }, draft: true },
    makeId: templateId,
  },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
const D = '/dashboard/api/templates';
export const DASHBOARD_ID_CHECKS = [
  { method: 'GET' as const, path: `${D}/:id`, makeId: templateId },
  { method: 'PATCH' as const, path: `${D}/:id`, makeId: templateId, body: { subject: 'taken over' } },
  { method: 'DELETE' as const, path: `${D}/:id`, makeId: templateId },
  { method: 'GET' as const, path: `${D}/:id/versions`, makeId: templateId },
  { method: 'POST' as const, path: `${D}/:id/publish`, makeId: templateId },
  { method: 'POST' as const, path: `${D}/:id/preview`, makeId: templateId, body: { substitution_data: {} } },
  { method: 'POST' as const, path: `${D}/:id/send-test`, makeId: templateId, body: { email: 'probe@example.com' } },
];
