import type { SmtpCredentialsService } from './smtp-credentials.service.ts';
import type { Database } from '../../db/index.ts';
import type { IdempotencyService } from '../../idempotency/idempotency.service.ts';
import { type TSchema, Type } from '@sinclair/typebox';
import { type CrudResource, registerCrudRoutes } from '../../http/crud-routes.ts';
import type { TypedApp } from '../../http/route-module.ts';

/** What the SMTP credential routes (/v1 and dashboard) need. */
export interface SmtpCredentialRoutesDeps {
  smtpCredentials: SmtpCredentialsService;
  idempotency: IdempotencyService;
  database: Database;
}

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

const CreateSmtpCredentialBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
);

/** The SMTP credential use cases the /v1 and dashboard routes share (http/crud-routes.ts). */
export const SMTP_CREDENTIALS: CrudResource<typeof CreateSmtpCredentialBody, TSchema, SmtpCredentialRoutesDeps> = {
  createBody: CreateSmtpCredentialBody,
  create: async (c, caller, input) => (db) => c.smtpCredentials.create(caller.tenantId, input, db),
  service: (c) => c.smtpCredentials,
};

export function registerSmtpCredentialRoutes(app: TypedApp, c: SmtpCredentialRoutesDeps) {
  registerCrudRoutes(app, c, {
    ...SMTP_CREDENTIALS,
    path: '/v1/smtp-credentials',
    scopes: SCOPE,
    tags: ['SMTP credentials'],
    view: SmtpCredential,
    created: CreatedSmtpCredential,
    secretFields: ['password'],
    resource: 'smtpCredentials',
    summaries: {
      create: 'Create SMTP credentials (the password is returned once)',
      list: 'List SMTP credentials (never the password)',
      delete: 'Delete SMTP credentials',
    },
  });
}
