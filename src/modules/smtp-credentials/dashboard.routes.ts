import type { SmtpCredentialRoutesDeps } from './smtp-credentials.routes.ts';
import { registerSessionCrudRoutes } from '../../http/crud-routes.ts';
import type { TypedApp } from '../../http/route-module.ts';
import { SMTP_CREDENTIALS } from './smtp-credentials.routes.ts';

/** The dashboard's SMTP credentials page: the /v1/smtp-credentials use cases. */
export function registerSmtpCredentialDashboardRoutes(app: TypedApp, c: SmtpCredentialRoutesDeps) {
  registerSessionCrudRoutes(app, c, SMTP_CREDENTIALS, '/dashboard/api/smtp-credentials', ['list', 'create', 'delete']);
}
