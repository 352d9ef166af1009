import type { WebhooksService } from './webhooks.service.ts';
import type { Database } from '../../db/index.ts';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import type { IdempotencyService, IdempotentResult } from '../../idempotency/idempotency.service.ts';
import {
  CreatedWebhook,
  CreateWebhookBody,
  Delivery,
  RotatedSecret,
  TestResult,
  UpdateWebhookBody,
  Webhook,
} from './webhooks.schema.ts';

/** What the webhook routes (/v1 and dashboard) need. */
export interface WebhookRoutesDeps {
  webhooks: WebhooksService;
  idempotency: IdempotencyService;
  database: Database;
}

const SCOPE = ['manage:webhooks'] as const;
const TAGS = ['Webhooks'];

/**
 * Like replyIdempotent, for an effect that runs outside any transaction (the test POST makes an
 * outbound HTTP call of up to 10 s; inside a transaction it would block SQLite's only connection).
 */
async function replyIdempotentOutside(
  c: WebhookRoutesDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  effect: () => Promise<IdempotentResult>,
) {
  const header = req.headers['idempotency-key'];
  const res = await c.idempotency.execute(
    {
      tenantId: authOf(req).tenantId,
      scope: `${req.method} ${req.url.split('?')[0] ?? req.url}`,
      key: Array.isArray(header) ? header[0] : header,
      body: req.body,
    },
    async () => {
      throw new Error('unreachable: the effect runs outside');
    },
    { outside: effect },
  );
  if (res.replayed) reply.header('Idempotent-Replayed', 'true');
  return reply.code(res.status).send(res.body);
}

/** The webhook use cases the /v1 and dashboard routes share (http/crud-routes.ts). */
export const WEBHOOKS: CrudResource<typeof CreateWebhookBody, typeof UpdateWebhookBody, WebhookRoutesDeps> = {
  createBody: CreateWebhookBody,
  updateBody: UpdateWebhookBody,
  create: async (c, caller, input) => {
    // Validation, DNS included, happens before the idempotent transaction opens.
    const prepared = await c.webhooks.prepareCreate(input);
    return (db) => c.webhooks.insertPrepared(db, caller.tenantId, prepared);
  },
  service: (c) => c.webhooks,
};

export function registerWebhookRoutes(app: TypedApp, c: WebhookRoutesDeps) {
  registerCrudRoutes(app, c, {
    ...WEBHOOKS,
    path: '/v1/webhooks',
    scopes: SCOPE,
    tags: TAGS,
    view: Webhook,
    created: CreatedWebhook,
    secretFields: ['secret'],
    resource: 'webhooks',
    summaries: {
      create: 'Create a webhook (the signing secret is returned once)',
      list: 'List webhooks',
      get: 'Get a webhook',
      update: 'Update a webhook; enabled:true re-activates a disabled one (seen by every node within 5 s)',
      delete: 'Delete a webhook, its queue and its delivery log',
    },
    docs: {
      create: {
        request: {
          url: 'https://hooks.example.com/postyard',
          name: 'Order system',
          events: ['message.delivered', 'message.bounced', 'message.complained'],
          dispatch_policy: 'single',
        },
      },
    },
  });
  app.addSchema(Delivery);

  app.post(
    '/v1/webhooks/:id/rotate-secret',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.rotateSecret',
        summary: 'Make a new signing secret; the old one keeps signing beside it for 24 h',
        params: IdParams,
        response: { 200: RotatedSecret, ...errorResponses(404) },
      },
    },
    async (req) => c.webhooks.rotateSecret(authOf(req).tenantId, req.params.id),
  );

  app.post(
    '/v1/webhooks/:id/test',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.test',
        summary: 'Send a webhook.test event now and report the outcome',
        params: IdParams,
        headers: IdempotencyHeader,
        response: { 200: TestResult, ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => {
      const tenantId = authOf(req).tenantId;
      await c.webhooks.get(tenantId, req.params.id); // 404 before the idempotency key is claimed
      return replyIdempotentOutside(c, req, reply, async () => ({
        status: 200,
        body: await c.webhooks.test(tenantId, req.params.id),
      }));
    },
  );

  app.get(
    '/v1/webhooks/:id/deliveries',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.deliveries',
        summary: 'Delivery attempts of a webhook, newest first',
        params: IdParams,
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(Type.Ref('WebhookDelivery')), ...errorResponses(404) },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.webhooks.deliveries(authOf(req).tenantId, req.params.id, q.limit, q.cursor);
    },
  );
}
