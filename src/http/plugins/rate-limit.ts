import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError } from '../../lib/errors.ts';
import type { RateDecision, RateLimiter } from '../../rate-limit/rate-limiter.ts';
import type { TenantRateLimits } from '../tenant-limits.ts';

export interface RateLimitSettings {
  /** The per-key and per-tenant limits of a tenant (defaults + overrides), cached by the caller. */
  limitsFor: (tenantId: string) => Promise<TenantRateLimits>;
}

const on = (p: { rps: number; burst: number }) => p.rps > 0 && p.burst > 0; // 0 turns a limit off

function setHeaders(reply: FastifyReply, d: RateDecision) {
  reply.header('RateLimit-Limit', String(d.limit));
  reply.header('RateLimit-Remaining', String(d.remaining));
  reply.header('RateLimit-Reset', String(d.resetSeconds));
}

/**
 * Two token buckets on every authenticated /v1 request: one per API key and one per tenant
 * (all its keys together, so making keys does not multiply the limit). The tenant bucket is
 * only drawn from once the key's allows the request, so a key flooding past its own limit does
 * not use up its tenant's budget for the other keys. RateLimit-* headers describe the tighter of
 * the two (fewer requests left).
 */
export function installRateLimit(app: FastifyInstance, limiter: RateLimiter, settings: RateLimitSettings) {
  app.addHook('onRequest', async (req, reply) => {
    if (!req.auth) return;
    const limits = await settings.limitsFor(req.auth.tenantId);
    let shown: RateDecision | undefined;
    if (on(limits.key)) {
      shown = await limiter.check(req.auth.keyId, limits.key);
      if (!shown.allowed) return refuse(reply, shown, 'this API key');
    }
    if (on(limits.tenant)) {
      const d = await limiter.check(`tenant:${req.auth.tenantId}`, limits.tenant);
      if (!shown || d.remaining < shown.remaining || !d.allowed) shown = d;
      if (!d.allowed) return refuse(reply, d, 'this tenant (all its API keys together)');
    }
    if (shown) setHeaders(reply, shown);
  });
}

function refuse(reply: FastifyReply, d: RateDecision, whose: string): never {
  setHeaders(reply, d);
  throw new AppError('rate_limited', `Too many requests for ${whose}; retry after the indicated delay`, {
    headers: { 'Retry-After': String(d.retryAfterSeconds) },
  });
}
