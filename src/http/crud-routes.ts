import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Executor } from '../db/executor.ts';
import type { Database } from '../db/index.ts';
import type { IdempotencyService } from '../idempotency/idempotency.service.ts';
import type { Page } from '../lib/pagination.ts';
import { SESSION_ROUTE, sessionTenant } from './dashboard-session.ts';
import { replyIdempotent } from './idempotent.ts';
import type { RouteDocs } from './openapi/index.ts';
import { authOf } from './plugins/auth.ts';
import { noContent, type TypedApp } from './route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from './schemas.ts';

/**
 * The routes of a tenant's resource, written once: POST (201), GET list (newest first, keyset
 * cursor), GET, PATCH and DELETE by id (204), on /v1 (bearer key, Idempotency-Key on create,
 * documented) and in the dashboard (signed-in session, hidden). A resource declares its bodies,
 * its use cases and which of the five routes it serves; routes of its own (publish, verify, ...)
 * it registers beside these.
 */
export type CrudOperation = 'create' | 'list' | 'get' | 'update' | 'delete';

/** Who asks: an API key with the scopes it holds, or a signed-in dashboard user (every scope). */
export interface Caller {
  tenantId: string;
  scopes: ReadonlySet<string> | 'all';
}

/** A create's write: run in the Idempotency-Key's transaction on /v1, on the database in the dashboard. */
export type CreateWrite = (db: Executor) => Promise<unknown>;

/** What the list, get, update and delete routes call; get and update only where served. */
export interface CrudService<Update> {
  list(tenantId: string, limit: number, cursor?: string): Promise<Page<unknown>>;
  get?(tenantId: string, id: string): Promise<unknown>;
  update?(tenantId: string, id: string, input: Update): Promise<unknown>;
  /** An API key may revoke only keys whose scopes it holds; other resources ignore the scopes. */
  delete(tenantId: string, id: string, callerScopes: ReadonlySet<string> | 'all'): Promise<void>;
}

/**
 * What a resource's /v1 routes and its dashboard routes share: the bodies and the use cases.
 * `D` is what its use cases are read from (the route module's deps).
 */
export interface CrudResource<CreateBody extends TSchema, UpdateBody extends TSchema, D> {
  createBody: CreateBody;
  updateBody?: UpdateBody;
  /**
   * Checks what needs no write (validation that looks things up, DNS), then hands back the
   * write. On /v1 the checks run before the Idempotency-Key is claimed.
   */
  create: (c: D, caller: Caller, input: Static<CreateBody>) => Promise<CreateWrite>;
  /** Read from the deps per request, as a route module's handlers do. */
  service: (c: D) => CrudService<Static<UpdateBody>>;
}

export interface CrudRoutes<CreateBody extends TSchema, UpdateBody extends TSchema, D>
  extends CrudResource<CreateBody, UpdateBody, D> {
  /** The collection, e.g. `/v1/ip-pools`; items are `<path>/:id`. */
  path: string;
  scopes: readonly string[];
  tags: string[];
  /** The client's resource name: operationIds are `<resource>.create`, `.list`, ... */
  resource: string;
  /**
   * The view every route answers. With an $id it is added to the app once and referenced by
   * every response; without one it is written out in each.
   */
  view: TObject;
  /** What POST answers when it is more than the view (a secret shown once). */
  created?: TObject;
  /** Top-level fields of the created answer holding a secret: null in every Idempotency-Key replay. */
  secretFields?: readonly string[];
  /** The routes served (those with a summary), registered in the order create, list, get, update, delete. */
  summaries: Partial<Record<CrudOperation, string>>;
  docs?: Partial<Record<CrudOperation, RouteDocs>>;
  /** Where a 409 may come from besides create: update (a name taken), delete (still in use). */
  conflicts?: readonly ('update' | 'delete')[];
}

const OPERATIONS: readonly CrudOperation[] = ['create', 'list', 'get', 'update', 'delete'];

/** Fails at start-up when a served route's use case is missing. */
function assertServes<C extends TSchema, U extends TSchema, D>(
  resource: CrudResource<C, U, D>,
  c: D,
  path: string,
  ops: readonly CrudOperation[],
) {
  const service = resource.service(c);
  for (const op of ops) {
    if ((op === 'get' || op === 'update') && !service[op])
      throw new Error(`${path}: a ${op} route needs service.${op}`);
    if (op === 'update' && !resource.updateBody) throw new Error(`${path}: an update route needs updateBody`);
  }
}

/** The /v1 routes of `spec` (see CrudRoutes); errors declared for the OpenAPI document per operation. */
export function registerCrudRoutes<
  CreateBody extends TSchema,
  UpdateBody extends TSchema,
  D extends { idempotency: IdempotencyService },
>(app: TypedApp, c: D, spec: CrudRoutes<CreateBody, UpdateBody, D>) {
  const { path, tags, summaries, resource } = spec;
  const served = OPERATIONS.filter((op) => summaries[op] !== undefined);
  assertServes(spec, c, path, served);
  const schema = (op: CrudOperation) => ({ tags, operationId: `${resource}.${op}`, summary: summaries[op] });
  const config = (op: CrudOperation) => {
    const docs = spec.docs?.[op];
    return { scopes: spec.scopes, ...(docs ? { openapi: docs } : {}) };
  };
  const conflict = (op: 'update' | 'delete') => (spec.conflicts?.includes(op) ? [409] : []);
  let View: TSchema = spec.view;
  if (spec.view.$id) {
    app.addSchema(spec.view);
    View = Type.Ref(spec.view.$id);
  }
  const service = () => spec.service(c);

  if (served.includes('create')) {
    const idempotency = spec.secretFields ? { secretFields: spec.secretFields } : {};
    app.post(
      path,
      {
        config: config('create'),
        schema: {
          ...schema('create'),
          headers: IdempotencyHeader,
          body: spec.createBody,
          response: { 201: spec.created ?? View, ...errorResponses(409, 415, 422) },
        },
      },
      async (req, reply) => {
        const write = await spec.create(c, authOf(req), req.body);
        return replyIdempotent(c, req, reply, async (trx) => ({ status: 201, body: await write(trx) }), idempotency);
      },
    );
  }
  if (served.includes('list')) {
    app.get(
      path,
      {
        config: config('list'),
        schema: {
          ...schema('list'),
          querystring: Type.Object(PageQuery),
          response: { 200: pageOf(View), ...errorResponses() },
        },
      },
      async (req) => {
        const q = pageQuery(req.query);
        return service().list(authOf(req).tenantId, q.limit, q.cursor);
      },
    );
  }
  if (served.includes('get')) {
    app.get(
      `${path}/:id`,
      {
        config: config('get'),
        schema: { ...schema('get'), params: IdParams, response: { 200: View, ...errorResponses(404) } },
      },
      async (req) => service().get!(authOf(req).tenantId, req.params.id),
    );
  }
  if (served.includes('update')) {
    app.patch(
      `${path}/:id`,
      {
        config: config('update'),
        schema: {
          ...schema('update'),
          params: IdParams,
          body: spec.updateBody as UpdateBody,
          response: { 200: View, ...errorResponses(404, ...conflict('update'), 415, 422) },
        },
      },
      async (req) => service().update!(authOf(req).tenantId, req.params.id, req.body),
    );
  }
  if (served.includes('delete')) {
    app.delete(
      `${path}/:id`,
      {
        config: config('delete'),
        schema: {
          ...schema('delete'),
          params: IdParams,
          response: { 204: Type.Null(), ...errorResponses(404, ...conflict('delete')) },
        },
      },
      async (req, reply) => {
        const auth = authOf(req);
        await service().delete(auth.tenantId, req.params.id, auth.scopes);
        return noContent(reply);
      },
    );
  }
}

/** A signed-in dashboard user acts for the whole tenant: every scope. */
function dashboardCaller(req: FastifyRequest): Caller {
  return { tenantId: sessionTenant(req), scopes: 'all' };
}

/**
 * The dashboard's routes of `resource` under `path` (e.g. `/dashboard/api/webhooks`), for the
 * dashboard's session scope: the same use cases as /v1, authenticated by the session, hidden
 * from the OpenAPI document, answered without a response schema.
 */
export function registerSessionCrudRoutes<
  CreateBody extends TSchema,
  UpdateBody extends TSchema,
  D extends { database: Database },
>(
  app: TypedApp,
  c: D,
  resource: CrudResource<CreateBody, UpdateBody, D>,
  path: string,
  operations: readonly CrudOperation[],
) {
  assertServes(resource, c, path, operations);
  const config = SESSION_ROUTE;
  const service = () => resource.service(c);
  // Registered in one fixed order, list, create, get, update, delete, whatever the order of
  // `operations`: the Allow header of a 405 lists the methods in registration order.
  if (operations.includes('list')) {
    app.get(path, { config, schema: { hide: true, querystring: Type.Object(PageQuery) } }, async (req) => {
      const q = pageQuery(req.query);
      return service().list(sessionTenant(req), q.limit, q.cursor);
    });
  }
  if (operations.includes('create')) {
    app.post(path, { config, schema: { hide: true, body: resource.createBody } }, async (req, reply) => {
      const write = await resource.create(c, dashboardCaller(req), req.body);
      return reply.code(201).send(await write(c.database.db));
    });
  }
  if (operations.includes('get')) {
    app.get(`${path}/:id`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
      service().get!(sessionTenant(req), req.params.id),
    );
  }
  if (operations.includes('update')) {
    app.patch(
      `${path}/:id`,
      { config, schema: { hide: true, params: IdParams, body: resource.updateBody as UpdateBody } },
      async (req) => service().update!(sessionTenant(req), req.params.id, req.body),
    );
  }
  if (operations.includes('delete')) {
    app.delete(`${path}/:id`, { config, schema: { hide: true, params: IdParams } }, async (req, reply) => {
      await service().delete(sessionTenant(req), req.params.id, 'all');
      return noContent(reply);
    });
  }
}
