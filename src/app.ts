import './http/types.ts';
import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Container } from './container.ts';
import { AppError } from './lib/errors.ts';
import { FEATURE_MODULES } from './modules/index.ts';
import { webhooksDoc } from './modules/webhooks/webhooks.openapi.ts';
import { installErrorHandler, sendError } from './http/error-handler.ts';
import type { RouteModule } from './http/route-module.ts';
import { lazySerializerFactory, lazyValidator, SchemaWarmers } from './http/lazy-schemas.ts';
import { installInputGuard } from './http/input-guard.ts';
import { httpServerOptions } from './http/server-options.ts';
import { installAuth } from './http/plugins/auth.ts';
import { installMetrics } from './http/plugins/metrics.ts';
import { installOpenApi } from './http/openapi/index.ts';
import { installRateLimit } from './http/plugins/rate-limit.ts';
import { genRequestId } from './http/plugins/request-id.ts';
import { ErrorBody } from './http/schemas.ts';
import { registerTenantLimitCache } from './http/tenant-limits.ts';

export type App = FastifyInstance;

/** Feature routes are listed in src/modules/index.ts (FEATURE_MODULES), not here. */
export type { RouteModule } from './http/route-module.ts';

function makeAjv(coerce: boolean) {
  // Bodies are never coerced ("5" stays a string and fails an integer rule); queries are.
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
    removeAdditional: false,
    strict: false,
  });
  addFormats.default(ajv);
  return ajv;
}

/**
 * The routes a sending node answers most (send, then poll events and look up messages): their
 * schemas are compiled before the node listens (warmRouteSchemas), every other route's on its
 * first request (lazy-schemas.ts).
 */
export const HOT_ROUTES = ['POST /v1/transmissions', 'GET /v1/events', 'GET /v1/messages/:id'] as const;

const schemaWarmers = new WeakMap<App, SchemaWarmers>();

/** Compiles the routes' schemas now (before listen); returns how many schemas there were. */
export function warmRouteSchemas(app: App, routes: readonly string[] = HOT_ROUTES): number {
  return schemaWarmers.get(app)?.compile(routes) ?? 0;
}

/** Builds the HTTP app without listening (tests use inject; main.ts listens). */
export async function buildApp(c: Container, extraModules: RouteModule<Container>[] = []): Promise<App> {
  const warmers = new SchemaWarmers();
  const app = Fastify({
    loggerInstance: c.logger as FastifyBaseLogger,
    // One log line per request, written by our onResponse hook (with tenant and timing).
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: genRequestId,
    requestIdHeader: false,
    bodyLimit: c.config.bodyLimitBytes,
    // Timeouts for slow clients, contract answers for malformed requests (server-options.ts).
    ...httpServerOptions(c.config),
    // Response serializers are compiled on a route's first answer, not at start (lazy-schemas.ts).
    schemaController: { compilersFactory: { buildSerializer: lazySerializerFactory(warmers) } },
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // While closing: idle connections are cut at once, requests in flight finish, requests on
    // kept-alive connections get the contract's 503, and after the grace period (hook below)
    // whatever is left (e.g. a client stuck mid-upload) is cut too.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true },
    // Malformed URLs and over-long path parameters are refused by the router before any hook:
    // answer them like every other unknown path (contract error body, X-Request-ID).
    frameworkErrors: (_err, req, reply) => {
      reply.header('X-Request-ID', req.id);
      return sendError(reply, 'not_found', [{ code: 'not_found', message: 'No such resource' }]);
    },
  }) as unknown as FastifyInstance;

  // Made on the first request that needs one (a new Ajv compiles its meta-schemas: start-up time).
  let bodyAjv: Ajv | undefined;
  let queryAjv: Ajv | undefined;
  schemaWarmers.set(app, warmers);
  app.setValidatorCompiler(({ schema, httpPart, method, url }) =>
    lazyValidator(
      () =>
        httpPart === 'body'
          ? (bodyAjv ??= makeAjv(false)).compile(schema as object)
          : (queryAjv ??= makeAjv(true)).compile(schema as object),
      warmers,
      `${method} ${url}`,
    ),
  );

  installErrorHandler(app, c.metrics);
  app.addSchema(ErrorBody);
  // The OpenAPI document and the /docs reference page (src/http/openapi/); the events a webhook
  // receives are the webhooks module's to describe.
  await installOpenApi(app, { webhooks: webhooksDoc });
  await app.register(multipart, {
    limits: { fileSize: c.config.importLimitBytes, files: 1, fields: 10, parts: 20 },
  });

  const routes: { method: string; pattern: RegExp }[] = [];
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    const pattern = new RegExp(`^${r.url.replace(/:[^/]+/g, '[^/]+').replace(/\/$/, '')}/?$`);
    for (const m of methods) routes.push({ method: m, pattern });
  });

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    setTimeout(() => app.server.closeAllConnections(), c.config.shutdownGraceSeconds * 1000).unref();
  });
  app.addHook('onRequest', async (req, reply) => {
    reply.header('X-Request-ID', req.id);
    // No response is ever to be content-sniffed into HTML (JSON echoing tenant-supplied text).
    reply.header('X-Content-Type-Options', 'nosniff');
    if (closing) {
      return sendError(reply, 'unavailable', [{ code: 'unavailable', message: 'Server is shutting down; retry' }], {
        'Retry-After': '1',
        Connection: 'close',
      });
    }
  });
  installAuth(app, c.apiKeys, c.failedAuth);
  installRateLimit(app, c.rateLimiter, { limitsFor: registerTenantLimitCache(c) });

  // JSON endpoints answer 415 for any other Content-Type, including none (docs/api.md "Requests and answers").
  app.addHook('preValidation', async (req) => {
    if (!req.routeOptions.schema?.body) return;
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    if (type === 'application/json') return;
    if (type === 'multipart/form-data' && req.routeOptions.config?.multipart) return;
    throw new AppError('unsupported_media_type', 'Content-Type must be application/json');
  });
  // Nesting depth and NUL characters (see input-guard.ts).
  installInputGuard(app);

  app.addHook('onResponse', async (req, reply) => {
    req.log.info(
      {
        method: req.method,
        url: req.url.split('?')[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        tenant: req.auth?.tenantId,
      },
      'request',
    );
  });

  installMetrics(app, c.metrics);

  app.get('/healthz', { config: { public: true }, schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { config: { public: true }, schema: { hide: true } }, async (_req, reply) => {
    try {
      await c.database.ping();
      return { status: 'ready' };
    } catch {
      return sendError(reply, 'unavailable', [{ code: 'unavailable', message: 'Database unreachable' }]);
    }
  });
  app.get('/v1/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());

  // Route modules get the TypeBox-typed view of the same instance (types only; Ajv as above).
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  for (const mod of [...FEATURE_MODULES, ...extraModules]) await mod(typed, c);

  app.setNotFoundHandler(async (req, reply) => {
    const path = req.url.split('?')[0] ?? '/';
    const allowed = [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))];
    if (allowed.length > 0) {
      reply.header('Allow', allowed.join(', '));
      return sendError(reply, 'method_not_allowed', [
        { code: 'method_not_allowed', message: `${req.method} is not allowed here; use ${allowed.join(', ')}` },
      ]);
    }
    return sendError(reply, 'not_found', [{ code: 'not_found', message: `No route for ${req.method} ${path}` }]);
  });

  return app;
}
