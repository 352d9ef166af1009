/**
 * The API description: @fastify/swagger builds the OpenAPI 3.1 document from the route schemas
 * (served at GET /v1/openapi.json by app.ts), enrich.ts completes it from what each route
 * declares (its scopes, its route config `openapi`), and @fastify/swagger-ui serves a reference
 * page at /docs that loads /v1/openapi.json. A new module's routes appear with no change here.
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { enrichDocument, type RouteInfo, type WebhooksDoc } from './enrich.ts';

export type { RouteDocs } from './enrich.ts';

/** Fastify `/v1/webhooks/:id` -> OpenAPI `/v1/webhooks/{id}`. */
function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export async function installOpenApi(app: FastifyInstance, opts: { webhooks?: WebhooksDoc } = {}): Promise<void> {
  const routes = new Map<string, RouteInfo>();
  app.addHook('onRoute', (r) => {
    const methods = Array.isArray(r.method) ? r.method : [r.method];
    for (const m of methods) {
      routes.set(`${m} ${openApiPath(r.url)}`, { scopes: r.config?.scopes ?? [], docs: r.config?.openapi ?? {} });
    }
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Postyard API',
        version: '1.0.0',
        description:
          'Send email over HTTP and SMTP: transmissions, events, webhooks, suppressions, templates, sending ' +
          'domains. Authenticate with an API key (`Authorization: Bearer pyk_...`); each operation names the ' +
          'scope it needs. Errors are `{"errors":[{"code","message","field"?}]}`. Full reference: docs/api.md.',
      },
      servers: [{ url: '/' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'pyk_...' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _frag, i) => String(json.$id ?? `def-${i}`) },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject;
      return enrichDocument(documentObject.openapiObject as Record<string, unknown>, routes, opts.webhooks);
    },
  });
  // The reference page: swagger-ui's own files (no CDN), its page and scripts under a CSP of
  // their own; `urls` makes it load the same document clients and generators use.
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: true,
    uiConfig: { urls: [{ url: '/v1/openapi.json', name: 'Postyard API' }], deepLinking: true },
    uiHooks: {
      onRequest: async (_req, reply) => {
        reply.header('Referrer-Policy', 'no-referrer');
      },
    },
  });
}
