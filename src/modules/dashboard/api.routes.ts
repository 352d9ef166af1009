import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Container } from '../../container.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { IdParams, PageQuery, pageQuery } from '../../http/schemas.ts';
import { AppError } from '../../lib/errors.ts';
import { SCOPES } from '../api-keys/scopes.ts';
import { MAX_DESCRIPTION_CHARS, REASON_CATEGORIES, SUPPRESSION_TYPES } from '../suppressions/suppressions.service.ts';
import { EventsQuery } from '../events/events.schema.ts';
import { importCsv } from '../suppressions/csv-upload.ts';
import { SuppressionsQuery } from '../suppressions/suppressions.schema.ts';
import { CreateWebhookBody, UpdateWebhookBody } from '../webhooks/webhooks.schema.ts';
import { sessionOf } from './session.plugin.ts';
import { messageEngagement, overviewStats, RANGES, type RangeName } from './stats.ts';

/**
 * The dashboard's JSON API: thin routes over the same services as /v1 (so every rule, limit and
 * tenant check is the same), authenticated by the session instead of a bearer key. A signed-in
 * user acts for the whole tenant (every scope). Hidden from the public OpenAPI document.
 */
const SESSION = { public: true, dashboard: 'session' } as const;
const P = '/dashboard/api';

const tenant = (req: FastifyRequest) => sessionOf(req).tenantId;
const ListQuery = Type.Object(PageQuery);
const DEFAULT_RANGE: RangeName = '7d';

const SuppressionBody = Type.Object(
  {
    identifier: Type.String({ minLength: 1, maxLength: 320 }),
    type: Type.String({ enum: [...SUPPRESSION_TYPES] }),
    reason_category: Type.String({ enum: [...REASON_CATEGORIES] }),
    description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION_CHARS })),
  },
  { additionalProperties: false },
);

export function registerDashboardApiRoutes(app: TypedApp, c: Container) {
  const config = SESSION;

  // ---- overview and activity ----------------------------------------------------------------
  app.get(
    `${P}/stats`,
    {
      config,
      schema: {
        hide: true,
        querystring: Type.Object({
          range: Type.Optional(
            Type.Unsafe<RangeName>(Type.String({ enum: Object.keys(RANGES), default: DEFAULT_RANGE })),
          ),
        }),
      },
    },
    async (req) => overviewStats(c.database.db, tenant(req), req.query.range ?? DEFAULT_RANGE),
  );
  app.get(`${P}/events`, { config, schema: { hide: true, querystring: EventsQuery } }, async (req) =>
    c.events.list(tenant(req), pageQuery(req.query)),
  );
  app.get(`${P}/messages/:id`, { config, schema: { hide: true, params: IdParams } }, async (req) => {
    const m = await c.transmissions.getMessage(tenant(req), req.params.id); // 404 first: another tenant's id
    return { ...m, engagement: await messageEngagement(c.database.db, tenant(req), req.params.id) };
  });
  app.get(`${P}/transmissions/:id`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.transmissions.get(tenant(req), req.params.id),
  );

  // ---- API keys -------------------------------------------------------------------------------
  app.get(`${P}/scopes`, { config, schema: { hide: true } }, async () => ({ scopes: [...SCOPES] }));
  app.get(`${P}/api-keys`, { config, schema: { hide: true, querystring: ListQuery } }, async (req) => {
    const q = pageQuery(req.query);
    return c.apiKeys.list(tenant(req), q.limit, q.cursor);
  });
  app.post(
    `${P}/api-keys`,
    {
      config,
      schema: {
        hide: true,
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 200 }),
            scopes: Type.Array(Type.String({ enum: [...SCOPES] }), { minItems: 1, maxItems: SCOPES.length * 2 }),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (req, reply) => reply.code(201).send(await c.apiKeys.create(tenant(req), req.body, 'all')),
  );
  app.delete(`${P}/api-keys/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
    await c.apiKeys.delete(tenant(req), req.params.id, 'all');
    return noContent(reply);
  });

  // ---- SMTP credentials -----------------------------------------------------------------------
  app.get(`${P}/smtp-credentials`, { config, schema: { hide: true, querystring: ListQuery } }, async (req) => {
    const q = pageQuery(req.query);
    return c.smtpCredentials.list(tenant(req), q.limit, q.cursor);
  });
  app.post(
    `${P}/smtp-credentials`,
    {
      config,
      schema: {
        hide: true,
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
      },
    },
    async (req, reply) => reply.code(201).send(await c.smtpCredentials.create(tenant(req), req.body)),
  );
  app.delete(`${P}/smtp-credentials/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
    await c.smtpCredentials.delete(tenant(req), req.params.id);
    return noContent(reply);
  });

  // ---- webhooks -------------------------------------------------------------------------------
  app.get(`${P}/webhooks`, { config, schema: { hide: true, querystring: ListQuery } }, async (req) => {
    const q = pageQuery(req.query);
    return c.webhooks.list(tenant(req), q.limit, q.cursor);
  });
  app.post(`${P}/webhooks`, { config, schema: { hide: true, body: CreateWebhookBody } }, async (req, reply) =>
    reply.code(201).send(await c.webhooks.create(tenant(req), req.body)),
  );
  app.patch(
    `${P}/webhooks/:id`,
    { config, schema: { hide: true, params: IdParams, body: UpdateWebhookBody } },
    async (req) => c.webhooks.update(tenant(req), req.params.id, req.body),
  );
  app.delete(`${P}/webhooks/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
    await c.webhooks.delete(tenant(req), req.params.id);
    return noContent(reply);
  });
  app.post(`${P}/webhooks/:id/rotate-secret`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.webhooks.rotateSecret(tenant(req), req.params.id),
  );
  app.post(`${P}/webhooks/:id/test`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.webhooks.test(tenant(req), req.params.id),
  );
  app.get(
    `${P}/webhooks/:id/deliveries`,
    { config, schema: { hide: true, params: IdParams, querystring: ListQuery } },
    async (req) => {
      const q = pageQuery(req.query);
      return c.webhooks.deliveries(tenant(req), req.params.id, q.limit, q.cursor);
    },
  );

  // ---- suppressions ---------------------------------------------------------------------------
  app.get(
    `${P}/suppressions`,
    {
      config,
      schema: {
        hide: true,
        querystring: SuppressionsQuery,
      },
    },
    async (req) => c.suppressions.list(tenant(req), pageQuery(req.query)),
  );
  app.post(`${P}/suppressions`, { config, schema: { hide: true, body: SuppressionBody } }, async (req) =>
    c.suppressions.upsert(tenant(req), [req.body], { source: 'dashboard' }),
  );
  app.post(
    `${P}/suppressions/import`,
    { config: { ...config, multipart: true }, schema: { hide: true } },
    async (req, reply) => {
      if (!req.isMultipart())
        throw new AppError('unsupported_media_type', 'Expected multipart/form-data with a CSV file');
      // The reader of POST /v1/suppressions: a multipart body cut before its final boundary is a
      // 422 on `file` there; this route's own copy answered it 500 ("Premature close").
      return importCsv(c, req, reply, tenant(req));
    },
  );
  app.delete(`${P}/suppressions/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
    await c.suppressions.delete(tenant(req), req.params.id);
    return noContent(reply);
  });

  // ---- sending domains ------------------------------------------------------------------------
  app.get(`${P}/domains`, { config, schema: { hide: true, querystring: ListQuery } }, async (req) => {
    const q = pageQuery(req.query);
    return c.domains.list(tenant(req), q.limit, q.cursor);
  });
  app.post(
    `${P}/domains`,
    {
      config,
      schema: {
        hide: true,
        body: Type.Object({ domain: Type.String({ minLength: 1, maxLength: 253 }) }, { additionalProperties: false }),
      },
    },
    async (req, reply) => {
      const prepared = await c.domains.prepare(tenant(req), req.body);
      return reply.code(201).send(await c.domains.create(tenant(req), prepared));
    },
  );
  app.post(`${P}/domains/:id/verify`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.domains.verify(tenant(req), req.params.id),
  );
  app.delete(`${P}/domains/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
    await c.domains.delete(tenant(req), req.params.id);
    return noContent(reply);
  });
}
