import type { PacingService } from './pacing.service.ts';
import { Type } from '@sinclair/typebox';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { errorResponses } from '../../http/schemas.ts';
import { MAX_LIMIT } from './pacing-data.ts';
import { GET_SITE_DOCS, LIST_SITES_DOCS, LIST_SUSPENSIONS_DOCS, PUT_SITE_DOCS } from './pacing.examples.ts';

/** What the pacing routes need. */
export interface PacingRoutesDeps {
  pacing: PacingService;
}

const SCOPE = ['manage:pacing'] as const;
const TAGS = ['Pacing'];

const Limit = Type.Union([Type.Integer({ minimum: 1, maximum: MAX_LIMIT }), Type.Null()]);
const Limits = {
  max_connections: Limit,
  messages_per_connection: Limit,
  messages_per_minute: Limit,
  messages_per_hour: Limit,
};
const Whole = Type.Integer();
const Fixed = Type.Object({
  max_connections: Whole,
  messages_per_connection: Whole,
  messages_per_minute: Whole,
  messages_per_hour: Whole,
});
const PacingSite = Type.Object(
  {
    site: Type.String(),
    mx: Type.Array(Type.String()),
    ...Limits,
    defaults: Fixed,
    effective: Fixed,
    updated_at: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'PacingSite' },
);
const PutSiteBody = Type.Object(
  {
    max_connections: Type.Optional(Limit),
    messages_per_connection: Type.Optional(Limit),
    messages_per_minute: Type.Optional(Limit),
    messages_per_hour: Type.Optional(Limit),
  },
  { additionalProperties: false },
);
const Suspension = Type.Object(
  {
    site: Type.String(),
    source_address: Type.Union([Type.String(), Type.Null()]),
    rule: Type.String(),
    action: Type.String(),
    factor: Type.Number(),
    reason: Type.String(),
    started_at: Type.String(),
    until: Type.String(),
  },
  { $id: 'PacingSuspension' },
);
// Any text: an unknown site is a 404 (not_found), like an unknown id elsewhere.
const SiteParams = Type.Object({ site: Type.String({ maxLength: 1000 }) });
const listOf = <T extends ReturnType<typeof Type.Ref>>(item: T) =>
  Type.Object({ data: Type.Array(item), next_cursor: Type.Null() });

/** /v1/pacing (docs/api.md "Pacing", docs/pacing.md). */
export function registerPacingRoutes(app: TypedApp, c: PacingRoutesDeps) {
  app.addSchema(PacingSite);
  app.addSchema(Suspension);
  const SiteRef = Type.Ref('PacingSite');
  const SuspensionRef = Type.Ref('PacingSuspension');

  app.get(
    '/v1/pacing/sites',
    {
      config: { scopes: SCOPE, openapi: LIST_SITES_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'pacing.listSites',
        summary: "Every destination site of the pacing file with this tenant's limits (one page: the file bounds it)",
        response: { 200: listOf(SiteRef), ...errorResponses() },
      },
    },
    async (req) => ({ data: await c.pacing.listSites(authOf(req).tenantId), next_cursor: null }),
  );

  app.get(
    '/v1/pacing/sites/:site',
    {
      config: { scopes: SCOPE, openapi: GET_SITE_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'pacing.getSite',
        summary: "A destination site's limits for this tenant (null = the shipped default)",
        params: SiteParams,
        response: { 200: SiteRef, ...errorResponses(404) },
      },
    },
    async (req) => c.pacing.getSite(authOf(req).tenantId, req.params.site),
  );

  app.put(
    '/v1/pacing/sites/:site',
    {
      config: { scopes: SCOPE, openapi: PUT_SITE_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'pacing.putSite',
        summary: "Set this tenant's limits for a site (null or absent = the shipped default); applies within 5 s",
        params: SiteParams,
        body: PutSiteBody,
        response: { 200: SiteRef, ...errorResponses(404, 415, 422) },
      },
    },
    async (req) => c.pacing.putSite(authOf(req).tenantId, req.params.site, req.body),
  );

  app.get(
    '/v1/pacing/suspensions',
    {
      config: { scopes: SCOPE, openapi: LIST_SUSPENSIONS_DOCS },
      schema: {
        tags: TAGS,
        operationId: 'pacing.listSuspensions',
        summary: 'Site x source address pairs an automation rule suspended or slowed, until when',
        response: { 200: listOf(SuspensionRef), ...errorResponses() },
      },
    },
    async () => ({ data: await c.pacing.listSuspensions(), next_cursor: null }),
  );
}
