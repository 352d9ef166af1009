import type { TransmissionsService } from './transmissions.service.ts';
import type { TemplateForSend } from '../content/send-content.ts';
import type { TenantsService } from '../tenants/tenants.service.ts';
import type { GroupCommit } from '../../db/group-commit.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { BIG_BODY_BYTES } from '../../http/input-guard.ts';
import { yieldToLoop } from '../../lib/pacer.ts';
import { errorResponses, IdempotencyHeader, IdParams } from '../../http/schemas.ts';
import { AcceptedTransmission, MessageView, TransmissionBody, TransmissionView } from './transmissions.schema.ts';
import { validateTransmission } from './transmissions.validate.ts';
import { GET_DOCS, MESSAGE_DOCS, SEND_DOCS } from './transmissions.examples.ts';

/** What the transmission routes need. */
export interface TransmissionRoutesDeps {
  groupCommit: GroupCommit;
  idempotency: IdempotencyService;
  tenants: Pick<TenantsService, 'getCached'>;
  /** Stored templates, as sending reads them (the templates module's service). */
  templates: { forSend(tenantId: string, id: string, useDraft: boolean): Promise<TemplateForSend | null> };
  transmissions: TransmissionsService;
}

const READ_SCOPES = ['send:transmissions', 'read:events'] as const;

export function registerTransmissionRoutes(app: TypedApp, c: TransmissionRoutesDeps) {
  app.post(
    '/v1/transmissions',
    {
      config: { scopes: ['send:transmissions'], openapi: SEND_DOCS },
      schema: {
        tags: ['Transmissions'],
        operationId: 'transmissions.send',
        summary: 'Accept a transmission for delivery (202 means durably stored, not delivered)',
        headers: IdempotencyHeader,
        body: TransmissionBody,
        response: { 202: AcceptedTransmission, ...errorResponses(409, 413, 415, 422) },
      },
    },
    async (req, reply) => {
      const auth = authOf(req);
      const tenant = await c.tenants.getCached(auth.tenantId);
      // Parsing and schema checks of a big body ran just before, in the same stretch: let the
      // event loop breathe before the semantic checks (10,000 recipients).
      if (Number(req.headers['content-length'] ?? 0) > BIG_BODY_BYTES) await yieldToLoop();
      const { template_id: templateId, use_draft: useDraft } = req.body.content;
      const template =
        templateId === undefined ? undefined : await c.templates.forSend(auth.tenantId, templateId, useDraft ?? false);
      const input = await validateTransmission(req.body, tenant.default_from, undefined, template);
      return replyIdempotent(
        c,
        req,
        reply,
        async (trx) => ({ status: 202, body: await c.transmissions.accept(trx, auth.tenantId, input) }),
        // As SMTP submission: without an Idempotency-Key the accept only reads and inserts, so on
        // PostgreSQL its batch needs no transaction (src/db/group-commit.ts runInserts); with a
        // key the batch's transaction also completes the key.
        {
          runner: req.headers['idempotency-key'] === undefined ? c.groupCommit.runInserts : c.groupCommit.runBuffered,
          // The worker of this process claims the new mail now, not at its next poll.
          afterCommit: () => c.transmissions.queued(),
        },
      );
    },
  );

  app.get(
    '/v1/transmissions/:id',
    {
      config: { scopes: READ_SCOPES, openapi: GET_DOCS },
      schema: {
        tags: ['Transmissions'],
        operationId: 'transmissions.get',
        summary: 'A transmission with its per-recipient messages and their states',
        params: IdParams,
        response: { 200: TransmissionView, ...errorResponses(404) },
      },
    },
    async (req) => c.transmissions.get(authOf(req).tenantId, req.params.id),
  );

  app.get(
    '/v1/messages/:id',
    {
      config: { scopes: READ_SCOPES, openapi: MESSAGE_DOCS },
      schema: {
        tags: ['Transmissions'],
        operationId: 'messages.get',
        summary: 'One message with its state and every delivery attempt (with SMTP transcript)',
        params: IdParams,
        response: { 200: MessageView, ...errorResponses(404) },
      },
    },
    async (req) => c.transmissions.getMessage(authOf(req).tenantId, req.params.id),
  );
}
