/**
 * Route-catalog entries of /v1/suppressions (collected by test/helpers/route-catalog.ts), so the
 * shared security suite runs over them.
 */
import type { MakeId, RouteSpec } from '../helpers/route-spec.ts';
import { csvUpload } from './multipart.ts';

const SUP = ['manage:suppressions'];

/** Creates a suppression of the tenant (the POST answers counts, not ids) and returns its id. */
export const suppressionId: MakeId = async (ctx, t) => {
  const rec = await ctx.c.suppressions.addAutomatic(ctx.c.database.db, t.tenantId, {
    identifier: `s${Math.random().toString(36).slice(2, 10)}@catalog.example.test`,
    reason_category: 'manual',
    source: 'api',
  });
  return rec.id;
};

export const SUPPRESSION_ROUTES: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/suppressions',
    scopes: SUP,
    sampleBody: { items: [{ identifier: 'catalog@example.test', type: 'email', reason_category: 'manual' }] },
  },
  { method: 'GET', path: '/v1/suppressions', scopes: SUP },
  { method: 'GET', path: '/v1/suppressions/:id', scopes: SUP, makeId: suppressionId },
  { method: 'DELETE', path: '/v1/suppressions/:id', scopes: SUP, makeId: suppressionId },
];

const upload = csvUpload('identifier\ncatalog-import@example.test\n');

/** The same POST as a multipart CSV import (one path, two bodies). */
export const SUPPRESSION_IMPORT_ROUTE: RouteSpec = {
  method: 'POST',
  path: '/v1/suppressions',
  scopes: SUP,
  sampleBody: upload.payload,
  contentType: upload.contentType,
};

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
export const DASHBOARD_ID_CHECKS = [
  { method: 'DELETE' as const, path: '/dashboard/api/suppressions/:id', makeId: suppressionId },
];
