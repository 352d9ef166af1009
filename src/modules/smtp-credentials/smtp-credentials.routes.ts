import { Type } from '@sinclair/typebox';
import type { Container } from '../../container.ts';
import { replyIdempotent } from '../../http/idempotent.ts';
import { authOf } from '../../http/plugins/auth.ts';
import { noContent, type TypedApp } from '../../http/route-module.ts';
import { errorResponses, IdempotencyHeader, IdParams, PageQuery, pageOf, pageQuery } from '../../http/schemas.ts';

const SCOPE = ['manage:smtp-credentials'] as const;

const SmtpCredential = Type.Object({
  id: Type.String(),
  name: Type.String(),
  username: Type.String(),
  created_at: Type.String(),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
});

const CreatedSmtpCredential = Type.Object({
  ...SmtpCredential.properties,
  password: Type.Union([Type.String(), Type.Null()], { description: 'Shown once, null in replays.' }),
});

export function registerSmtpCredentialRoutes(app: TypedApp, c: Container) {
  app.post(
    '/v1/smtp-credentials',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['SMTP credentials'],
        operationId: 'smtpCredentials.create',
        summary: 'Create SMTP credentials (the password is returned once)',
        headers: IdempotencyHeader,
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
        response: { 201: CreatedSmtpCredential, ...errorResponses(409, 415, 422) },
      },
    },
    async (req, reply) => {
      const tenantId = authOf(req).tenantId;
      return replyIdempotent(
        c,
        req,
        reply,
        async (trx) => ({ status: 201, body: await c.smtpCredentials.create(tenantId, req.body, trx) }),
        { secretFields: ['password'] },
      );
    },
  );

  app.get(
    '/v1/smtp-credentials',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['SMTP credentials'],
        operationId: 'smtpCredentials.list',
        summary: 'List SMTP credentials (never the password)',
        querystring: Type.Object(PageQuery),
        response: { 200: pageOf(SmtpCredential), ...errorResponses() },
      },
    },
    async (req) => {
      const q = pageQuery(req.query);
      return c.smtpCredentials.list(authOf(req).tenantId, q.limit, q.cursor);
    },
  );

  app.delete(
    '/v1/smtp-credentials/:id',
    {
      config: { scopes: SCOPE },
      schema: {
        tags: ['SMTP credentials'],
        operationId: 'smtpCredentials.delete',
        summary: 'Delete SMTP credentials',
        params: IdParams,
        response: { 204: Type.Null(), ...errorResponses(404) },
      },
    },
    async (req, reply) => {
      await c.smtpCredentials.delete(authOf(req).tenantId, req.params.id);
      return noContent(reply);
    },
  );
}
