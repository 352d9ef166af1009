import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import {
  CreateTemplateBody,
  PreviewBody,
  PreviewResult,
  Template,
  TemplateVersion,
  UpdateTemplateBody,
} from './templates.schema.ts';

const SCOPE = ['manage:templates'] as const;
const TAGS = ['Templates'];

/** /v1/templates (docs/api.md "Templates", docs/templates.md). */
export function registerTemplateRoutes(app: TypedApp, c: Container) {
  app.addSchema(TemplateVersion);
  app.addSchema(Template);
  const TemplateRef = Type.Ref('Template');

  app.post(
    '/v1/templates',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.create',
        summary: 'Create a template (saved as version 1 of its draft)',
        headers: IdempotencyHeader,
        body: CreateTemplateBody,
        response: { 201: TemplateRef, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      const prepared = await c.templates.prepareCreate(req.body);
      return replyIdempotent(c, req, reply, async (trx) => ({
        status: 201,
        body: await c.templates.insertPrepared(trx, auth.tenantId, prepared),
      }));
    },
  );

  app.get(
    '/v1/templates',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.list',
        summary: 'List templates, newest first',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(TemplateRef), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.templates.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.get(
    '/v1/templates/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.get',
        summary: 'Get a template with its draft and published versions',
        params: IdParams,
        response: { 200: TemplateRef, ...errorResponses(404) },
      },
    },
    async (req) => c.templates.get(authOf(req).tenantId, req.params.id),
  );

  app.patch(
    '/v1/templates/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.update',
        summary: 'Save a new draft version; fields not sent are carried over from the latest draft',
        params: IdParams,
        body: UpdateTemplateBody,
        response: { 200: TemplateRef, ...errorResponses(404, 415, 422) },
      },
    },
    async (req) => c.templates.update(authOf(req).tenantId, req.params.id, req.body),
  );

  app.delete(
    '/v1/templates/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'templates.delete',
        summary: 'Delete a template and its versions (mail already accepted is not affected)',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await c.templates.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );

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
