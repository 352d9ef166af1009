import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox';
import type { Transaction } from 'kysely';
import type { Container } from '../container.ts';
import type { DB } from '../db/schema.ts';
import type { Page } from '../lib/pagination.ts';
import { replyIdempotent } from './idempotent.ts';
import type { RouteDocs } from './openapi/index.ts';
import { authOf } from './plugins/auth.ts';
import { noContent, type TypedApp } from './route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from './schemas.ts';

/** What the five routes call; `create` runs in the Idempotency-Key transaction. */
export interface CrudService<Create, Update, View> {
  create(trx: Transaction<DB>, tenantId: string, input: Create): Promise<View>;
  list(tenantId: string, limit: number, cursor?: string): Promise<Page<View>>;
  get(tenantId: string, id: string): Promise<View>;
  update(tenantId: string, id: string, input: Update): Promise<View>;
  delete(tenantId: string, id: string): Promise<void>;
}

type Operation = 'create' | 'list' | 'get' | 'update' | 'delete';

export interface CrudRoutes<CreateBody extends TSchema, UpdateBody extends TSchema, View> {
  /** The collection, e.g. `/v1/ip-pools`; items are `<path>/:id`. */
  path: string;
  scopes: readonly string[];
  tags: string[];
  /** The view's schema, which must have an $id: added to the app once, referenced by every response. */
  view: TObject;
  /** The client's resource name: operationIds are `<resource>.create`, `.list`, ... */
  resource: string;
  createBody: CreateBody;
  updateBody: UpdateBody;
  summaries: Record<Operation, string>;
  docs: Record<Operation, RouteDocs>;
  /** Read from the container per request, as a route module's handlers do. */
  service: (c: Container) => CrudService<Static<CreateBody>, Static<UpdateBody>, View>;
}

/**
 * The five routes of a tenant's named resource: POST (idempotent, 201), GET list (newest first,
 * keyset cursor), GET, PATCH and DELETE by id (204). One definition, so resources of this shape
 * (IP pools, warmup policies) answer, validate and document alike. Errors declared for the
 * OpenAPI document: 409 on create and update (name_taken), on delete (in_use); 415 and 422 where
 * there is a body; 404 by id.
 */
export function registerCrudRoutes<CreateBody extends TSchema, UpdateBody extends TSchema, View>(
  app: TypedApp,
  c: Container,
  spec: CrudRoutes<CreateBody, UpdateBody, View>,
) {
  const { path, tags, summaries, docs, resource } = spec;
  const config = (op: Operation) => ({ scopes: spec.scopes, openapi: docs[op] });
  if (!spec.view.$id) throw new Error(`${path}: the view schema needs an $id`);
  app.addSchema(spec.view);
  const ViewRef = Type.Ref(spec.view.$id);

  app.post(
    path,
    {
      config: config('create'),
      schema: {
        tags,
        operationId: `${resource}.create`,
        summary: summaries.create,
        headers: IdempotencyHeader,
        body: spec.createBody,
        response: { 201: ViewRef, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      return replyIdempotent(c, req, reply, async (trx) => ({
        status: 201,
        body: await spec.service(c).create(trx, auth.tenantId, req.body),
      }));
    },
  );

  app.get(
    path,
    {
      config: config('list'),
      schema: {
        tags,
        operationId: `${resource}.list`,
        summary: summaries.list,
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(ViewRef), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return spec.service(c).list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.get(
    `${path}/:id`,
    {
      config: config('get'),
      schema: {
        tags,
        operationId: `${resource}.get`,
        summary: summaries.get,
        params: IdParams,
        response: { 200: ViewRef, ...errorResponses(404) },
      },
    },
    async (req) => spec.service(c).get(authOf(req).tenantId, req.params.id),
  );

  app.patch(
    `${path}/:id`,
    {
      config: config('update'),
      schema: {
        tags,
        operationId: `${resource}.update`,
        summary: summaries.update,
        params: IdParams,
        body: spec.updateBody,
        response: { 200: ViewRef, ...errorResponses(404, 409, 415, 422) },
      },
    },
    async (req) => spec.service(c).update(authOf(req).tenantId, req.params.id, req.body),
  );

  app.delete(
    `${path}/:id`,
    {
      config: config('delete'),
      schema: {
        tags,
        operationId: `${resource}.delete`,
        summary: summaries.delete,
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404, 409) },
      },
    },
    async (req, reply) => {
      await spec.service(c).delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );
}
