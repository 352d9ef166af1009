import type { FastifyInstance } from 'fastify';
import { AppError } from '../../lib/errors.ts';
import type { RateLimiter } from '../../modules/rate-limit/rate-limiter.ts';

export interface RateLimitSettings {
  rps: number;
  burst: number;
  /** Per-tenant overrides (tenants.rate_limit_rps/burst), looked up and cached by the caller. */
  tenantLimits?: (tenantId: string) => Promise<{ rps: number; burst: number } | null>;
}

/** Token bucket per API key with RateLimit-* headers on every authenticated /v1 answer. */
export function installRateLimit(app: FastifyInstance, limiter: RateLimiter, settings: RateLimitSettings) {
  app.addHook('onRequest', async (req, reply) => {
    if (!req.auth) return;
    const override = settings.tenantLimits ? await settings.tenantLimits(req.auth.tenantId) : null;
    const rps = override?.rps ?? settings.rps;
    const burst = override?.burst ?? settings.burst;
    if (rps <= 0 || burst <= 0) return; // 0 turns rate limiting off
    const d = await limiter.check(req.auth.keyId, { rps, burst });
    reply.header('RateLimit-Limit', String(d.limit));
    reply.header('RateLimit-Remaining', String(d.remaining));
    reply.header('RateLimit-Reset', String(d.resetSeconds));
    if (!d.allowed) {
      throw new AppError('rate_limited', 'Too many requests for this API key; retry after the indicated delay', {
        headers: { 'Retry-After': String(d.retryAfterSeconds) },
      });
    }
  });
}
