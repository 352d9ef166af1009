import type { SuppressionsService } from './suppressions.service.ts';
import { Type } from '@sinclair/typebox';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { IdParams, pageQuery } from '../../http/schemas.ts';
import { AppError } from '../../lib/errors.ts';
import { type CsvImportDeps, importCsv } from './csv-upload.ts';
import { SuppressionsQuery } from './suppressions.schema.ts';
import { MAX_DESCRIPTION_CHARS, REASON_CATEGORIES, SUPPRESSION_TYPES } from './suppressions.service.ts';

/** What the dashboard's suppression routes need. */
export interface SuppressionDashboardDeps extends CsvImportDeps {
  suppressions: SuppressionsService;
}

/** One suppression added by hand on the dashboard's suppressions page. */
const SuppressionBody = Type.Object(
  {
    identifier: Type.String({ minLength: 1, maxLength: 320 }),
    type: Type.String({ enum: [...SUPPRESSION_TYPES] }),
    reason_category: Type.String({ enum: [...REASON_CATEGORIES] }),
    description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION_CHARS })),
  },
  { additionalProperties: false },
);

/** The dashboard's suppressions page: the /v1/suppressions use cases, authenticated by the session. */
export function registerSuppressionDashboardRoutes(app: TypedApp, c: SuppressionDashboardDeps) {
  const P = '/dashboard/api/suppressions';
  const config = SESSION_ROUTE;
  app.get(P, { config, schema: { hide: true, querystring: SuppressionsQuery } }, async (req) =>
    c.suppressions.list(sessionTenant(req), pageQuery(req.query)),
  );
  app.post(P, { config, schema: { hide: true, body: SuppressionBody } }, async (req) =>
    c.suppressions.upsert(sessionTenant(req), [req.body], { source: 'dashboard' }),
  );
  app.post(`${P}/import`, { config: { ...config, multipart: true }, schema: { hide: true } }, async (req, reply) => {
    if (!req.isMultipart())
      throw new AppError('unsupported_media_type', 'Expected multipart/form-data with a CSV file');
    // The reader of POST /v1/suppressions: a multipart body cut before its final boundary is a
    // 422 on `file` there, as here.
    return importCsv(c, req, reply, sessionTenant(req));
  });
  app.delete(`${P}/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
    await c.suppressions.delete(sessionTenant(req), req.params.id);
    return noContent(reply);
  });
}
