import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';
import { CreatePoolBody, IpPool, UpdatePoolBody } from './ip-pools.schema.ts';
import {
  CREATE_POOL_DOCS,
  DELETE_POOL_DOCS,
  GET_POOL_DOCS,
  LIST_POOLS_DOCS,
  UPDATE_POOL_DOCS,
} from './ip-pools.examples.ts';

const SCOPE = ['manage:ip-pools'] as const;
const TAGS = ['IP pools'];

/** /v1/ip-pools (docs/api.md "IP pools", docs/ip-pools.md). */
export function registerIpPoolRoutes(app: TypedApp, c: Container) {
  app.addSchema(IpPool);
  const PoolRef = Type.Ref('IpPool');

  app.post(
    '/v1/ip-pools',
    {
      config: { scopes: SCOPE, openapi: CREATE_POOL_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'ipPools.create',
        summary: "Create an IP pool from this host's source addresses",
        headers: IdempotencyHeader,
        body: CreatePoolBody,
        response: { 201: PoolRef, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      return replyIdempotent(c, req, reply, async (trx) => ({
        status: 201,
        body: await c.ipPools.create(trx, auth.tenantId, req.body),
      }));
    },
  );

  app.get(
    '/v1/ip-pools',
    {
      config: { scopes: SCOPE, openapi: LIST_POOLS_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'ipPools.list',
        summary: 'List IP pools, newest first',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(PoolRef), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.ipPools.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.get(
    '/v1/ip-pools/:id',
    {
      config: { scopes: SCOPE, openapi: GET_POOL_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'ipPools.get',
        summary: 'Get an IP pool',
        params: IdParams,
        response: { 200: PoolRef, ...errorResponses(404) },
      },
    },
    async (req) => c.ipPools.get(authOf(req).tenantId, req.params.id),
  );

  app.patch(
    '/v1/ip-pools/:id',
    {
      config: { scopes: SCOPE, openapi: UPDATE_POOL_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'ipPools.update',
        summary: 'Change an IP pool; `addresses` replaces the whole list',
        params: IdParams,
        body: UpdatePoolBody,
        response: { 200: PoolRef, ...errorResponses(404, 409, 415, 422) },
      },
    },
    async (req) => c.ipPools.update(authOf(req).tenantId, req.params.id, req.body),
  );

  app.delete(
    '/v1/ip-pools/:id',
    {
      config: { scopes: SCOPE, openapi: DELETE_POOL_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'ipPools.delete',
        summary: 'Delete an IP pool (409 while another pool overflows into it)',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => {
      await c.ipPools.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );
}
