import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomBase62, safeEqual } from '../../lib/crypto.ts';
import type { DashboardAccounts, SessionInfo, StartedSession } from './accounts.service.ts';
import { DASHBOARD_PAGES, pathPattern } from './page-list.ts';
import { DEVICE_COOKIE, type IssuedDevice } from './trusted-device.ts';

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

export const SESSION_COOKIE = 'postyard_session';
export const LOGIN_CSRF_COOKIE = 'postyard_csrf';
export const CSRF_HEADER = 'x-csrf-token';
const TOKEN_RE = /^[0-9A-Za-z]{20,128}$/;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Pages a signed-out visit may be sent back to after sign-in (no open redirects): every page of
 * page-list.ts but the sign-in page, a path parameter being 1-64 letters, digits or dashes.
 */
const NEXT_PAGES = DASHBOARD_PAGES.filter((p) => !('signedOut' in p)).map((p) =>
  pathPattern(p.path, '[0-9A-Za-z-]{1,64}'),
);

export function safeNext(raw: unknown): string {
  if (typeof raw !== 'string') return '/';
  return NEXT_PAGES.some((re) => re.test(raw)) ? raw : '/';
}

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

interface CookieOptions {
  maxAgeSeconds?: number;
  sameSite: 'Lax' | 'Strict';
  path: string;
}

function serializeCookie(req: FastifyRequest, name: string, value: string, o: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${o.path}`, 'HttpOnly', `SameSite=${o.sameSite}`];
  if (o.maxAgeSeconds !== undefined) parts.push(`Max-Age=${o.maxAgeSeconds}`);
  if (isHttps(req)) parts.push('Secure');
  return parts.join('; ');
}

/** Fastify appends to set-cookie on every reply.header call (re-setting the list would repeat it). */
function appendCookie(reply: FastifyReply, cookie: string) {
  reply.header('set-cookie', cookie);
}

export function setSessionCookie(req: FastifyRequest, reply: FastifyReply, s: StartedSession) {
  // A session cookie (no Max-Age): the server-side expiry is what counts; closing the browser ends it too.
  appendCookie(reply, serializeCookie(req, SESSION_COOKIE, s.token, { sameSite: 'Lax', path: '/' }));
  appendCookie(
    reply,
    serializeCookie(req, LOGIN_CSRF_COOKIE, '', { sameSite: 'Strict', path: '/dashboard/api', maxAgeSeconds: 0 }),
  );
}

export function clearSessionCookie(req: FastifyRequest, reply: FastifyReply) {
  appendCookie(reply, serializeCookie(req, SESSION_COOKIE, '', { sameSite: 'Lax', path: '/', maxAgeSeconds: 0 }));
}

/**
 * The trusted-device cookie (trusted-device.ts): sent only to the sign-in and password routes
 * under /dashboard/api, never to other sites (Strict), unreadable by scripts. Kept at sign-out:
 * it trusts the browser, not a session.
 */
export function setDeviceCookie(req: FastifyRequest, reply: FastifyReply, d: IssuedDevice) {
  appendCookie(
    reply,
    serializeCookie(req, DEVICE_COOKIE, d.value, {
      sameSite: 'Strict',
      path: '/dashboard/api',
      maxAgeSeconds: d.maxAgeSeconds,
    }),
  );
}

export function deviceCookieOf(req: FastifyRequest): string | undefined {
  return parseCookies(req.headers.cookie)[DEVICE_COOKIE];
}

/** The pre-session (sign-in form) CSRF token: double-submit, cookie + X-CSRF-Token header. */
export function loginCsrfToken(req: FastifyRequest, reply: FastifyReply): string {
  const existing = parseCookies(req.headers.cookie)[LOGIN_CSRF_COOKIE];
  if (existing && TOKEN_RE.test(existing)) return existing;
  const token = randomBase62(43);
  appendCookie(reply, serializeCookie(req, LOGIN_CSRF_COOKIE, token, { sameSite: 'Strict', path: '/dashboard/api' }));
  return token;
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
 * any body is read.
 */
export function installDashboardSession(app: FastifyInstance, accounts: DashboardAccounts) {
  app.decorateRequest('dashboardSession', null);
  app.addHook('onRequest', async (req, reply) => {
    const kind = req.routeOptions.config?.dashboard;
    if (!kind) return;
    const cookies = parseCookies(req.headers.cookie);
    req.dashboardSession = await accounts.resolveSession(cookies[SESSION_COOKIE]);
    if (kind === 'page') {
      const path = req.url.split('?')[0] ?? '/';
      if (!req.dashboardSession && path !== '/login') {
        return reply.redirect(`/login?next=${encodeURIComponent(safeNext(path))}`, 302);
      }
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
