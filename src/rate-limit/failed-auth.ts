import { BoundedCache } from '../lib/bounded-cache.ts';
import { addressBudgetKey } from '../lib/client-address.ts';
import type { RateLimiter } from './rate-limiter.ts';

/** Which door a credential was tried at; each has its own budget per client address. */
export type AuthDoor = 'http' | 'smtp';

/**
 * Brute-force brake for credentials presented by clients (API keys on /v1, SMTP AUTH): a token
 * bucket of FAILED attempts per client address (an IPv6 client by its /64: addressBudgetKey),
 * `perTenMinutes` deep and refilled at that many per 10 minutes, kept in the shared rate-limit store so the budget holds across nodes. Successful
 * authentications never take from it. (The dashboard sign-in has its own, stricter limits in
 * DashboardAccounts.) See docs/security.md.
 *
 * Once a failure is refused, this node remembers the address as blocked until the bucket has a
 * token again, so a blocked client costs no store round trip (and, for SMTP, no scrypt hash).
 */
export class FailedAuthLimiter {
  /** When full, the entries used longest ago go first (those clients are asked of the store again). */
  private readonly blockedUntil = new BoundedCache<string, number>(10_000);

  constructor(
    private readonly limiter: RateLimiter,
    /** Failed attempts per client address per 10 minutes (burst the same); 0 = off. */
    readonly perTenMinutes: number,
  ) {}

  /** Seconds `client` must still wait at `door` (known on this node), else 0. */
  blockedFor(door: AuthDoor, client: string, nowMs = Date.now()): number {
    const key = `${door}:${addressBudgetKey(client)}`;
    const until = this.blockedUntil.get(key);
    if (until === undefined) return 0;
    if (until <= nowMs) {
      this.blockedUntil.delete(key);
      return 0;
    }
    return Math.ceil((until - nowMs) / 1000);
  }

  /** Counts one failure; returns the seconds to wait when the budget is spent (then blocked), else 0. */
  async recordFailure(door: AuthDoor, client: string): Promise<number> {
    if (this.perTenMinutes <= 0) return 0;
    const key = `${door}:${addressBudgetKey(client)}`;
    const d = await this.limiter.check(`authfail:${key}`, {
      rps: this.perTenMinutes / 600,
      burst: this.perTenMinutes,
    });
    if (d.allowed) return 0;
    this.blockedUntil.set(key, Date.now() + d.retryAfterSeconds * 1000);
    return d.retryAfterSeconds;
  }
}
