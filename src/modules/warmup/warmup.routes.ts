import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import { CreateWarmupBody, UpdateWarmupBody, WarmupPolicy } from './warmup.schema.ts';
import {
  CREATE_POLICY_DOCS,
  DELETE_POLICY_DOCS,
  GET_POLICY_DOCS,
  LIST_POLICIES_DOCS,
  UPDATE_POLICY_DOCS,
} from './warmup.examples.ts';

const SCOPE = ['manage:pacing'] as const;
const TAGS = ['Warmup policies'];

/** /v1/warmup-policies (docs/api.md "Warmup policies", docs/ip-pools.md "Warmup"). */
export function registerWarmupRoutes(app: TypedApp, c: Container) {
  app.addSchema(WarmupPolicy);
  const PolicyRef = Type.Ref('WarmupPolicy');

  app.post(
    '/v1/warmup-policies',
    {
      config: { scopes: SCOPE, openapi: CREATE_POLICY_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'warmupPolicies.create',
        summary: 'Create a warmup policy (stages of daily and hourly limits per address)',
        headers: IdempotencyHeader,
        body: CreateWarmupBody,
        response: { 201: PolicyRef, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      return replyIdempotent(c, req, reply, async (trx) => ({
        status: 201,
        body: await c.warmupPolicies.create(trx, auth.tenantId, req.body),
      }));
    },
  );

  app.get(
    '/v1/warmup-policies',
    {
      config: { scopes: SCOPE, openapi: LIST_POLICIES_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'warmupPolicies.list',
        summary: 'List warmup policies, newest first',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(PolicyRef), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.warmupPolicies.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.get(
    '/v1/warmup-policies/:id',
    {
      config: { scopes: SCOPE, openapi: GET_POLICY_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'warmupPolicies.get',
        summary: 'Get a warmup policy',
        params: IdParams,
        response: { 200: PolicyRef, ...errorResponses(404) },
      },
    },
    async (req) => c.warmupPolicies.get(authOf(req).tenantId, req.params.id),
  );

  app.patch(
    '/v1/warmup-policies/:id',
    {
      config: { scopes: SCOPE, openapi: UPDATE_POLICY_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'warmupPolicies.update',
        summary: 'Change a warmup policy; `stages` replaces the whole list',
        params: IdParams,
        body: UpdateWarmupBody,
        response: { 200: PolicyRef, ...errorResponses(404, 409, 415, 422) },
      },
    },
    async (req) => c.warmupPolicies.update(authOf(req).tenantId, req.params.id, req.body),
  );

  app.delete(
    '/v1/warmup-policies/:id',
    {
      config: { scopes: SCOPE, openapi: DELETE_POLICY_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'warmupPolicies.delete',
        summary: 'Delete a warmup policy (409 while a pool address uses it)',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => {
      await c.warmupPolicies.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );
}
