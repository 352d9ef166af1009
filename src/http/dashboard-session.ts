import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { safeEqual } from '../lib/crypto.ts';

/**
 * The dashboard's session guard: every route under the dashboard's encapsulated scope declares
 * its kind in its route config, and one onRequest hook authenticates the session cookie and
 * checks CSRF before any body is read. Features' dashboard routes (src/modules/<feature>/
 * dashboard.routes.ts) take the tenant from `sessionOf`; sign-in itself lives in the dashboard
 * module, which hands this guard its session store.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Dashboard routes: 'session' needs a signed-in session (and the CSRF header when it changes
     * state), 'public' is reachable signed out (state changes still need the pre-session CSRF
     * token), 'page' serves the single-page app (signed-out visits redirect to /login).
     */
    dashboard?: 'session' | 'public' | 'page';
  }
  interface FastifyRequest {
    dashboardSession: SessionInfo | null;
  }
}

/** A signed-in dashboard session (the user acts for the whole tenant: every scope). */
export interface SessionInfo {
  sessionId: string;
  tenantId: string;
  userId: string;
  csrfToken: string;
  viaLink: boolean;
  createdAt: string;
  expiresAt: string;
}

/** Where the guard looks a session cookie up (the dashboard's accounts). */
export interface SessionStore {
  resolveSession(token: string | undefined): Promise<SessionInfo | null>;
}

/** The route config of a dashboard JSON route that needs a signed-in session. */
export const SESSION_ROUTE = { public: true, dashboard: 'session' } as const;

export const SESSION_COOKIE = 'postyard_session';
export const LOGIN_CSRF_COOKIE = 'postyard_csrf';
export const CSRF_HEADER = 'x-csrf-token';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 1) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (!(name in out)) out[name] = value;
  }
  return out;
}

function isHttps(req: FastifyRequest): boolean {
  return req.protocol === 'https';
}

export interface CookieOptions {
  maxAgeSeconds?: number;
  sameSite: 'Lax' | 'Strict';
  path: string;
}

export function serializeCookie(req: FastifyRequest, name: string, value: string, o: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${o.path}`, 'HttpOnly', `SameSite=${o.sameSite}`];
  if (o.maxAgeSeconds !== undefined) parts.push(`Max-Age=${o.maxAgeSeconds}`);
  if (isHttps(req)) parts.push('Secure');
  return parts.join('; ');
}

/** Fastify appends to set-cookie on every reply.header call (re-setting the list would repeat it). */
export function appendCookie(reply: FastifyReply, cookie: string) {
  reply.header('set-cookie', cookie);
}

export function clearSessionCookie(req: FastifyRequest, reply: FastifyReply) {
  appendCookie(reply, serializeCookie(req, SESSION_COOKIE, '', { sameSite: 'Lax', path: '/', maxAgeSeconds: 0 }));
}

export function sendDashboardError(
  reply: FastifyReply,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
) {
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send({ errors: [{ code, message }] });
}

/** A state-changing request from another site: refused whatever tokens it carries. */
function crossSite(req: FastifyRequest): boolean {
  if (req.headers['sec-fetch-site'] === 'cross-site') return true;
  const origin = req.headers.origin;
  if (origin === undefined) return false;
  try {
    // Compared as URLs so a default port written out on one side (":443") still matches.
    const o = new URL(origin);
    return new URL(`${o.protocol}//${req.headers.host ?? ''}`).host !== o.host;
  } catch {
    return true;
  }
}

function headerToken(req: FastifyRequest): string {
  const h = req.headers[CSRF_HEADER];
  return (Array.isArray(h) ? h[0] : h) ?? '';
}

/**
 * Session authentication and CSRF checks for every dashboard route of `app` (an encapsulated
 * child of the main app, so /v1 keeps its bearer-only auth untouched). Runs in onRequest, before
 * any body is read. `signInRedirect` says where a signed-out visit of a page goes (null: the
 * page is served, e.g. the sign-in page itself).
 */
export function installDashboardSession(
  app: FastifyInstance,
  sessions: SessionStore,
  signInRedirect: (path: string) => string | null,
) {
  app.decorateRequest('dashboardSession', null);
  app.addHook('onRequest', async (req, reply) => {
    const kind = req.routeOptions.config?.dashboard;
    if (!kind) return;
    const cookies = parseCookies(req.headers.cookie);
    req.dashboardSession = await sessions.resolveSession(cookies[SESSION_COOKIE]);
    if (kind === 'page') {
      const redirect = req.dashboardSession ? null : signInRedirect(req.url.split('?')[0] ?? '/');
      if (redirect !== null) return reply.redirect(redirect, 302);
      return;
    }
    reply.header('Cache-Control', 'no-store');
    if (kind === 'session' && !req.dashboardSession) {
      if (cookies[SESSION_COOKIE]) clearSessionCookie(req, reply);
      return sendDashboardError(
        reply,
        401,
        'unauthorized',
        'Sign in to the dashboard first; the session is missing or expired',
      );
    }
    if (SAFE_METHODS.has(req.method)) return;
    if (crossSite(req)) return sendDashboardError(reply, 403, 'csrf_failed', 'Cross-site request refused');
    // Signed-in requests echo the session's token; the sign-in form echoes its cookie's token.
    const expected = [req.dashboardSession?.csrfToken, kind === 'public' ? cookies[LOGIN_CSRF_COOKIE] : undefined];
    const given = headerToken(req);
    if (!given || !expected.some((e) => e !== undefined && e !== '' && safeEqual(given, e))) {
      return sendDashboardError(
        reply,
        403,
        'csrf_failed',
        'Missing or invalid CSRF token; reload the page and try again',
      );
    }
  });
}

/** The session of a 'session' route (the hook has run). */
export function sessionOf(req: FastifyRequest): SessionInfo {
  const s = req.dashboardSession;
  if (!s) throw new Error('dashboard route without a session');
  return s;
}

/** The tenant a 'session' route acts for. */
export function sessionTenant(req: FastifyRequest): string {
  return sessionOf(req).tenantId;
}
