import type { TemplatesService } from './templates.service.ts';
import type { Database } from '../../db/index.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { Type } from '@sinclair/typebox';
import { inTransaction } from '../../db/executor.ts';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import {
  CreateTemplateBody,
  PreviewBody,
  PreviewResult,
  Template,
  TemplateVersion,
  UpdateTemplateBody,
} from './templates.schema.ts';

/** What the template routes need. */
export interface TemplateRoutesDeps {
  templates: TemplatesService;
  idempotency: IdempotencyService;
  database: Database;
}

const SCOPE = ['manage:templates'] as const;
const TAGS = ['Templates'];

/** The template use cases the /v1 and dashboard routes share (http/crud-routes.ts). */
export const TEMPLATES: CrudResource<typeof CreateTemplateBody, typeof UpdateTemplateBody, TemplateRoutesDeps> = {
  createBody: CreateTemplateBody,
  updateBody: UpdateTemplateBody,
  create: async (c, caller, input) => {
    const prepared = await c.templates.prepareCreate(input);
    // The template and its version 1 are written together.
    return (db) => inTransaction(db, (trx) => c.templates.insertPrepared(trx, caller.tenantId, prepared));
  },
  service: (c) => c.templates,
};

/** /v1/templates (docs/api.md "Templates", docs/templates.md). */
export function registerTemplateRoutes(app: TypedApp, c: TemplateRoutesDeps) {
  app.addSchema(TemplateVersion);
  registerCrudRoutes(app, c, {
    ...TEMPLATES,
    path: '/v1/templates',
    scopes: SCOPE,
    tags: TAGS,
    view: Template,
    resource: 'templates',
    summaries: {
      create: 'Create a template (saved as version 1 of its draft)',
      list: 'List templates, newest first',
      get: 'Get a template with its draft and published versions',
      update: 'Save a new draft version; fields not sent are carried over from the latest draft',
      delete: 'Delete a template and its versions (mail already accepted is not affected)',
    },
  });
  const TemplateRef = Type.Ref('Template');

  app.post(
    '/v1/templates/:id/publish',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.publish',
        summary: 'Publish the draft: sends by template_id use it from now on',
        params: IdParams,
        response: { 200: TemplateRef, ...errorResponses(404) },
      },
    },
    async (req) => c.templates.publish(authOf(req).tenantId, req.params.id),
  );

  app.get(
    '/v1/templates/:id/versions',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.versions',
        summary: 'Every saved version of a template, newest first',
        params: IdParams,
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(Type.Ref('TemplateVersion')), ...errorResponses(404) },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.templates.versions(authOf(req).tenantId, req.params.id, q.limit, q.cursor);
    },
  );

  app.post(
    '/v1/templates/:id/preview',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.preview',
        summary: 'Render the published (or draft) version with sample data',
        params: IdParams,
        body: PreviewBody,
        response: { 200: PreviewResult, ...errorResponses(404, 415, 422) },
      },
    },
    async (req) => c.templates.preview(authOf(req).tenantId, req.params.id, req.body),
  );
}
