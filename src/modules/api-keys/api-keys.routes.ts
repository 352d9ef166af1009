import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import { SCOPES } from './scopes.ts';

const SCOPE = ['manage:api-keys'] as const;

const ApiKey = Type.Object({
  id: Type.String(),
  name: Type.String(),
  scopes: Type.Array(Type.String()),
  key_prefix: Type.String(),
  created_at: Type.String(),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
});

const CreatedApiKey = Type.Object({
  ...ApiKey.properties,
  key: Type.Union([Type.String(), Type.Null()], { description: 'The raw key: shown once, null in replays.' }),
});

export function registerApiKeyRoutes(app: TypedApp, c: Container) {
  app.post(
    '/v1/api-keys',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['API keys'],
        operationId: 'apiKeys.create',
        summary: 'Create an API key (the raw key is returned once)',
        headers: IdempotencyHeader,
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 200 }),
            scopes: Type.Array(Type.String({ enum: [...SCOPES] }), { minItems: 1, maxItems: SCOPES.length * 2 }),
          },
          { additionalProperties: false },
        ),
        response: { 201: CreatedApiKey, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      return replyIdempotent(
        c,
        req,
        reply,
        async (trx) => ({
          status: 201,
          body: await c.apiKeys.create(auth.tenantId, req.body, auth.scopes, trx),
        }),
        { secretFields: ['key'] },
      );
    },
  );

  app.get(
    '/v1/api-keys',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['API keys'],
        operationId: 'apiKeys.list',
        summary: 'List API keys (never the raw key)',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(ApiKey), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.apiKeys.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.delete(
    '/v1/api-keys/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['API keys'],
        operationId: 'apiKeys.delete',
        summary: 'Delete (revoke) an API key',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      await c.apiKeys.delete(auth.tenantId, req.params.id, auth.scopes);
      return noContent(reply);
    },
  );
}
