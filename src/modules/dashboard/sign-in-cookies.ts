import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  appendCookie,
  LOGIN_CSRF_COOKIE,
  parseCookies,
  SESSION_COOKIE,
  serializeCookie,
} from '../../http/dashboard-session.ts';
import { randomBase62 } from '../../lib/crypto.ts';
import type { StartedSession } from './accounts.service.ts';
import { DASHBOARD_PAGES, pathPattern } from './page-list.ts';
import { DEVICE_COOKIE, type IssuedDevice } from './trusted-device.ts';

/**
 * The cookies of signing in (the session guard that reads them is src/http/dashboard-session.ts):
 * the session cookie, the trusted-device cookie, the sign-in form's CSRF token, and the page a
 * signed-out visit is sent back to after sign-in.
 */
const TOKEN_RE = /^[0-9A-Za-z]{20,128}$/;

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

/** Where a signed-out visit of page `path` goes: the sign-in page, with the way back. */
export function signInRedirect(path: string): string | null {
  return path === '/login' ? null : `/login?next=${encodeURIComponent(safeNext(path))}`;
}

export function setSessionCookie(req: FastifyRequest, reply: FastifyReply, s: StartedSession) {
  // A session cookie (no Max-Age): the server-side expiry is what counts; closing the browser ends it too.
  appendCookie(reply, serializeCookie(req, SESSION_COOKIE, s.token, { sameSite: 'Lax', path: '/' }));
  appendCookie(
    reply,
    serializeCookie(req, LOGIN_CSRF_COOKIE, '', { sameSite: 'Strict', path: '/dashboard/api', maxAgeSeconds: 0 }),
  );
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
