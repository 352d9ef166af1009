import type { TenantsService } from '../tenants/tenants.service.ts';
import type { Config } from '../../config.ts';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  clearSessionCookie,
  SESSION_ROUTE,
  type SessionInfo,
  sendDashboardError,
  sessionOf,
} from '../../http/dashboard-session.ts';
import type { TypedApp } from '../../http/route-module.ts';
import {
  type DashboardAccounts,
  MAX_PASSWORD_CHARS,
  normalizeLoginEmail,
  type StartedSession,
} from './accounts.service.ts';
import { deviceCookieOf, loginCsrfToken, setDeviceCookie, setSessionCookie } from './sign-in-cookies.ts';

/** What sign-in and the session routes need. */
export interface DashboardAuthDeps {
  config: Pick<Config, 'smtpPort' | 'smtpsPort'>;
  dashboard: DashboardAccounts;
  tenants: Pick<TenantsService, 'get'>;
}

const PUBLIC = { public: true, dashboard: 'public' } as const;

const LoginBody = Type.Object(
  {
    email: Type.String({ maxLength: 320 }),
    password: Type.String({ maxLength: MAX_PASSWORD_CHARS }),
  },
  { additionalProperties: false },
);

const LinkBody = Type.Object({ token: Type.String({ maxLength: 200 }) }, { additionalProperties: false });

const PasswordBody = Type.Object(
  {
    password: Type.String({ maxLength: MAX_PASSWORD_CHARS }),
    current_password: Type.Optional(Type.String({ maxLength: MAX_PASSWORD_CHARS })),
  },
  { additionalProperties: false },
);

/** What the single-page app needs to know about the signed-in user. */
async function sessionView(c: DashboardAuthDeps, req: FastifyRequest) {
  const s = sessionOf(req);
  const [user, tenant] = await Promise.all([c.dashboard.getUser(s.tenantId, s.userId), c.tenants.get(s.tenantId)]);
  return {
    authenticated: true,
    csrf_token: s.csrfToken,
    expires_at: s.expiresAt,
    user: { id: user.id, email: user.email, has_password: user.has_password, last_login_at: user.last_login_at },
    tenant: { id: tenant.id, name: tenant.name, default_from: tenant.default_from },
    // A session from a one-time link may set a password without the current one (for a while).
    password_reset_allowed: s.viaLink,
    smtp: { port: c.config.smtpPort, implicit_tls_port: c.config.smtpsPort },
  };
}

/** After a successful sign-in or password change: this browser is (again) a trusted device of the user. */
async function trustThisDevice(c: DashboardAuthDeps, req: FastifyRequest, reply: FastifyReply, s: SessionInfo) {
  setDeviceCookie(req, reply, await c.dashboard.trustDevice(s.tenantId, s.userId, deviceCookieOf(req)));
}

async function signedIn(c: DashboardAuthDeps, req: FastifyRequest, reply: FastifyReply, s: StartedSession) {
  setSessionCookie(req, reply, s);
  await trustThisDevice(c, req, reply, s);
  req.dashboardSession = s;
  return sessionView(c, req);
}

/** Sign-in, sign-out, the current session and the password of the signed-in user. */
export function registerDashboardAuthRoutes(app: TypedApp, c: DashboardAuthDeps) {
  const hide = { hide: true } as const;

  app.get('/dashboard/api/session', { config: PUBLIC, schema: hide }, async (req, reply) => {
    if (req.dashboardSession) return sessionView(c, req);
    return { authenticated: false, csrf_token: loginCsrfToken(req, reply) };
  });

  app.post('/dashboard/api/login', { config: PUBLIC, schema: { ...hide, body: LoginBody } }, async (req, reply) => {
    const body = req.body;
    // Checked before the password, so a locked-out guesser learns nothing more; only failures
    // count. A trusted device of the account is held back only by its own budget.
    const email = normalizeLoginEmail(body.email);
    const attempt = await c.dashboard.assertLoginAllowed(req.ip, email, deviceCookieOf(req));
    const s = await c.dashboard.loginWithPassword(body.email, body.password);
    if (!s) {
      await c.dashboard.recordLoginFailure(attempt);
      req.log.warn({ ip: req.ip }, 'dashboard sign-in failed');
      return sendDashboardError(reply, 401, 'invalid_credentials', 'The email or password is incorrect');
    }
    return signedIn(c, req, reply, s);
  });

  app.post('/dashboard/api/login/link', { config: PUBLIC, schema: { ...hide, body: LinkBody } }, async (req, reply) => {
    const attempt = await c.dashboard.assertLoginAllowed(req.ip, '');
    const s = await c.dashboard.loginWithLink(req.body.token);
    if (!s) {
      await c.dashboard.recordLoginFailure(attempt);
      return sendDashboardError(
        reply,
        401,
        'invalid_link',
        'This sign-in link is invalid, expired or already used; ask for a new one (postyard users link)',
      );
    }
    return signedIn(c, req, reply, s);
  });

  app.post('/dashboard/api/logout', { config: SESSION_ROUTE, schema: hide }, async (req, reply) => {
    await c.dashboard.endSession(sessionOf(req).sessionId);
    clearSessionCookie(req, reply);
    return reply.code(204).send();
  });

  app.post(
    '/dashboard/api/password',
    { config: SESSION_ROUTE, schema: { ...hide, body: PasswordBody } },
    async (req, reply) => {
      const s = sessionOf(req);
      // The sign-in limits apply, checked BEFORE the current password like a sign-in: past the
      // limit a guess is refused unheard (429), whether right or wrong, so a stolen session cannot
      // find out the password at full speed. A wrong current password counts as a failure. The
      // new password revokes the user's trusted devices; this browser is trusted again.
      const user = await c.dashboard.getUser(s.tenantId, s.userId);
      const attempt = await c.dashboard.assertLoginAllowed(req.ip, user.email, deviceCookieOf(req));
      await c.dashboard.setPassword(s, req.body, attempt);
      await trustThisDevice(c, req, reply, s);
      return reply.code(204).send();
    },
  );
}
