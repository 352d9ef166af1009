import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import type { IdempotentResult } from '../idempotency/idempotency.service.ts';
import {
  CreatedWebhook,
  CreateWebhookBody,
  Delivery,
  RotatedSecret,
  TestResult,
  UpdateWebhookBody,
  Webhook,
} from './webhooks.schema.ts';

const SCOPE = ['manage:webhooks'] as const;
const TAGS = ['Webhooks'];

/**
 * Like replyIdempotent, for an effect that runs outside any transaction (the test POST makes an
 * outbound HTTP call of up to 10 s; inside a transaction it would block SQLite's only connection).
 */
async function replyIdempotentOutside(
  c: Container,
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

export function registerWebhookRoutes(app: TypedApp, c: Container) {
  app.addSchema(Webhook);
  app.addSchema(Delivery);
  const WebhookRef = Type.Ref('Webhook');

  app.post(
    '/v1/webhooks',
    {
      config: {
        scopes: SCOPE,
        openapi: {
          request: {
            url: 'https://hooks.example.com/postyard',
            name: 'Order system',
            events: ['message.delivered', 'message.bounced', 'message.complained'],
            dispatch_policy: 'single',
          },
        },
      },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.create',
        summary: 'Create a webhook (the signing secret is returned once)',
        headers: IdempotencyHeader,
        body: CreateWebhookBody,
        response: { 201: CreatedWebhook, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      // Validation, DNS included, happens before the idempotent transaction opens.
      const prepared = await c.webhooks.prepareCreate(req.body);
      return replyIdempotent(
        c,
        req,
        reply,
        async (trx) => ({ status: 201, body: await c.webhooks.insertPrepared(trx, auth.tenantId, prepared) }),
        { secretFields: ['secret'] },
      );
    },
  );

  app.get(
    '/v1/webhooks',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.list',
        summary: 'List webhooks',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(WebhookRef), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.webhooks.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.get(
    '/v1/webhooks/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.get',
        summary: 'Get a webhook',
        params: IdParams,
        response: { 200: WebhookRef, ...errorResponses(404) },
      },
    },
    async (req) => c.webhooks.get(authOf(req).tenantId, req.params.id),
  );

  app.patch(
    '/v1/webhooks/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.update',
        summary: 'Update a webhook; enabled:true re-activates a disabled one (seen by every node within 5 s)',
        params: IdParams,
        body: UpdateWebhookBody,
        response: { 200: WebhookRef, ...errorResponses(404, 415, 422) },
      },
    },
    async (req) => c.webhooks.update(authOf(req).tenantId, req.params.id, req.body),
  );

  app.delete(
    '/v1/webhooks/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: TAGS,
        operationId: 'webhooks.delete',
        summary: 'Delete a webhook, its queue and its delivery log',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await c.webhooks.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );

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
