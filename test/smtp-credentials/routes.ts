/** Route-catalog entries of /v1/smtp-credentials (collected by test/helpers/route-catalog.ts). */
import { createVia, type MakeId, type RouteSpec } from '../helpers/route-spec.ts';

const SMTP = ['manage:smtp-credentials'];

export const smtpCredentialId: MakeId = (ctx, t) => createVia(ctx, t, '/v1/smtp-credentials', { name: 'target' });

export const SMTP_CREDENTIAL_ROUTES: RouteSpec[] = [
  { method: 'POST', path: '/v1/smtp-credentials', scopes: SMTP, sampleBody: { name: 'c' } },
  { method: 'GET', path: '/v1/smtp-credentials', scopes: SMTP },
  { method: 'DELETE', path: '/v1/smtp-credentials/:id', scopes: SMTP, makeId: smtpCredentialId },
];

/**
 * Dashboard routes of this module that take an id, for the isolation test
 * (test/security/isolation.test.ts collects every module's DASHBOARD_ID_CHECKS).
 */
export const DASHBOARD_ID_CHECKS = [
  { method: 'DELETE' as const, path: '/dashboard/api/smtp-credentials/:id', makeId: smtpCredentialId },
];
