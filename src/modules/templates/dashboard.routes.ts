import type { TransmissionsService } from '../transmissions/transmissions.service.ts';
import type { TenantsService } from '../tenants/tenants.service.ts';
import type { TemplateRoutesDeps } from './templates.routes.ts';
import { Type } from '@sinclair/typebox';
import { registerSessionCrudRoutes } from '../../http/crud-routes.ts';
import { SESSION_ROUTE, sessionTenant } from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { IdParams, PageQuery, pageQuery } from '../../http/schemas.ts';
import { validationError } from '../../lib/errors.ts';
import { validateTransmission } from '../transmissions/transmissions.validate.ts';
import { TEMPLATES } from './templates.routes.ts';
import { MAX_PART_CHARS, PreviewBody } from './templates.schema.ts';

/** What the dashboard's template routes need: the template use cases, and sending a test. */
export interface TemplateDashboardDeps extends TemplateRoutesDeps {
  tenants: Pick<TenantsService, 'getCached'>;
  transmissions: Pick<TransmissionsService, 'accept' | 'queued'>;
}

/**
 * The dashboard's template calls (docs/dashboard.md "Templates"): the /v1/templates use cases
 * authenticated by the session, plus "send test", which sends one message from the template to
 * an address through the normal accept path (suppressions, sender policy, events all apply).
 */
const P = '/dashboard/api/templates';
const config = SESSION_ROUTE;
const tenant = sessionTenant;

const SendTestBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320 }),
    substitution_data: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 200 })),
    draft: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const RenderBody = Type.Object(
  {
    subject: Type.String({ maxLength: 998 }),
    text: Type.Optional(Type.Union([Type.String({ maxLength: MAX_PART_CHARS }), Type.Null()])),
    html: Type.Optional(Type.Union([Type.String({ maxLength: MAX_PART_CHARS }), Type.Null()])),
    defaults: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 200 })),
    substitution_data: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { maxProperties: 200 })),
  },
  { additionalProperties: false },
);

export function registerTemplateDashboardRoutes(app: TypedApp, c: TemplateDashboardDeps) {
  // The editor's live preview of what is typed, before it is saved.
  app.post(`/dashboard/api/template-render`, { config, schema: { hide: true, body: RenderBody } }, async (req) =>
    c.templates.renderUnsaved(req.body),
  );
  registerSessionCrudRoutes(app, c, TEMPLATES, P, ['list', 'create', 'get', 'update', 'delete']);
  app.post(`${P}/:id/publish`, { config, schema: { hide: true, params: IdParams } }, async (req) =>
    c.templates.publish(tenant(req), req.params.id),
  );
  app.get(
    `${P}/:id/versions`,
    { config, schema: { hide: true, params: IdParams, querystring: Type.Object(PageQuery) } },
    async (req) => {
      const q = pageQuery(req.query);
      return c.templates.versions(tenant(req), req.params.id, q.limit, q.cursor);
    },
  );
  app.post(`${P}/:id/preview`, { config, schema: { hide: true, params: IdParams, body: PreviewBody } }, async (req) =>
    c.templates.preview(tenant(req), req.params.id, req.body),
  );
  app.post(
    `${P}/:id/send-test`,
    { config, schema: { hide: true, params: IdParams, body: SendTestBody } },
    async (req, reply) => {
      const tenantId = tenant(req);
      await c.templates.get(tenantId, req.params.id); // 404 before anything else
      const useDraft = req.body.draft ?? true;
      const template = await c.templates.forSend(tenantId, req.params.id, useDraft);
      const t = await c.tenants.getCached(tenantId);
      const body = {
        recipients: [
          {
            email: req.body.email,
            ...(req.body.substitution_data ? { substitution_data: req.body.substitution_data } : {}),
          },
        ],
        content: { template_id: req.params.id, use_draft: useDraft },
      };
      let input: Awaited<ReturnType<typeof validateTransmission>>;
      try {
        input = await validateTransmission(body, t.default_from, undefined, template);
      } catch (err) {
        // The only field of this form is the address: name it as the form knows it.
        const e = err as { details?: { field?: string; message: string }[] };
        if (e.details?.some((d) => d.field === 'recipients[0].email'))
          throw validationError([{ field: 'email', message: 'not a valid email address' }]);
        throw err;
      }
      const accepted = await c.database.db
        .transaction()
        .execute((trx) => c.transmissions.accept(trx, tenantId, { ...input, tags: ['template-test'] }));
      c.transmissions.queued();
      return reply.code(202).send(accepted);
    },
  );
}
