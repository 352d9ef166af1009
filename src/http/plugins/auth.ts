import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../lib/errors.ts';
import type { FailedAuthLimiter } from '../../rate-limit/failed-auth.ts';
import type { AuthContext } from '../types.ts';

/** What authentication needs of the API keys: a bearer token to its caller, or null. */
export interface BearerAuthenticator {
  authenticate(rawKey: string): Promise<AuthContext | null>;
}

/**
 * Bearer-token authentication and scope checks for every /v1 route. Runs in onRequest, before
 * the body is read, so an unauthenticated caller cannot make us parse a 10 MB body.
 */
export function installAuth(app: FastifyInstance, apiKeys: BearerAuthenticator, failedAuth?: FailedAuthLimiter) {
  app.decorateRequest('auth', null);
  app.addHook('onRequest', async (req) => {
    const cfg = req.routeOptions.config;
    // Unknown routes fall through to the 404/405 handler without revealing anything.
    if (cfg?.public || req.is404 || !req.url.startsWith('/v1/')) return;
    const header = req.headers.authorization;
    const m = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    const auth = m?.[1] ? await apiKeys.authenticate(m[1]) : null;
    if (!auth) {
      // Brute-force brake (docs/security.md): a presented credential that fails counts against the
      // client address; past the budget the answer is 429 instead of 401. A valid key is never
      // held back, so clients sharing an address with a guesser keep working.
      if (header && failedAuth) {
        const wait = failedAuth.blockedFor('http', req.ip) || (await failedAuth.recordFailure('http', req.ip));
        if (wait > 0) {
          throw new AppError('rate_limited', 'Too many failed authentication attempts from this address; retry later', {
            headers: { 'Retry-After': String(wait) },
          });
        }
      }
      throw new AppError('unauthorized', 'A valid API key is required: Authorization: Bearer <API_KEY>');
    }
    req.auth = auth;
    const scopes = cfg?.scopes ?? [];
    if (!scopes.some((s) => auth.scopes.has(s))) {
      throw new AppError('insufficient_scope', `This API key lacks the required scope: ${scopes.join(' or ')}`);
    }
  });
}

/** The authenticated context of a /v1 route handler (auth has run). */
export function authOf(req: FastifyRequest): AuthContext {
  if (!req.auth) throw new AppError('unauthorized', 'A valid API key is required');
  return req.auth;
}
