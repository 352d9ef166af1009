/**
 * Dashboard sign-in budgets (docs/dashboard.md "Sign-in limits", docs/security.md section 3):
 * token buckets of FAILED attempts in the shared rate-limit store, so they hold across nodes and
 * signing in often never locks anyone out. Checked before the password, so past a budget a guess
 * is refused unheard (429 with Retry-After).
 *
 * - per client address (an IPv6 client by its /64, src/lib/client-address.ts), whatever account;
 * - per account (the email, known or not), from every address together: rotating addresses buys
 *   no more guesses (30 addresses of one /64 got 30 guesses, because a locked email
 *   only held back the addresses that had failed for it);
 * - per trusted device (trusted-device.ts): an attempt from a browser that signed in to this
 *   account before is held back by its own budget only, never by the account's lock or its
 *   address's, so a stranger's guesses cannot lock the owner out of the browsers they use.
 * Every failure counts against all the budgets it has, device or not.
 */
import { addressBudgetKey } from '../../lib/client-address.ts';
import { sha256Hex } from '../../lib/crypto.ts';
import { AppError } from '../../lib/errors.ts';
import type { BucketParams, RateLimiter } from '../../rate-limit/rate-limiter.ts';

export interface SignInBudgets {
  /** Failed attempts per client address (any account): burst, refilled at rps. */
  perAddress: BucketParams;
  /** Failed attempts per account, all addresses together; past it the account is locked but for its trusted devices. */
  perAccount: BucketParams;
  /** Failed attempts per trusted device: the only budget that holds one back. */
  perDevice: BucketParams;
}

/** Failures per account per 15 minutes unless POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT says otherwise. */
export const DEFAULT_ACCOUNT_FAILURES = 10;

/** `perFifteenMinutes` failures per account per 15 minutes (burst the same, refilled continuously). */
export function signInBudgets(perFifteenMinutes = DEFAULT_ACCOUNT_FAILURES): SignInBudgets {
  return {
    perAddress: { burst: 20, rps: 20 / 600 },
    perAccount: { burst: perFifteenMinutes, rps: perFifteenMinutes / 900 },
    perDevice: { burst: 5, rps: 5 / 900 },
  };
}

/** One attempt's budget keys in the rate-limit store. */
export interface SignInAttempt {
  address: string;
  /** Null for attempts that name no account (one-time links). */
  account: string | null;
  /** Set when the attempt comes from a trusted device of its account. */
  device: string | null;
}

export class SignInLimits {
  constructor(
    private readonly limiter: RateLimiter,
    readonly budgets: SignInBudgets,
  ) {}

  /** The budget keys of an attempt from `ip` for `email` ('' = none), from trusted device `deviceId` if any. */
  attempt(ip: string, email: string, deviceId: string | null): SignInAttempt {
    const account = email ? `dashboard-login:account:${sha256Hex(email)}` : null;
    return {
      address: `dashboard-login:ip:${addressBudgetKey(ip)}`,
      account,
      device: account && deviceId ? `dashboard-login:device:${deviceId}` : null,
    };
  }

  /** Throws 429 rate_limited (with Retry-After) when a budget that applies to `a` is spent. */
  async assertAllowed(a: SignInAttempt): Promise<void> {
    const b = this.budgets;
    const checks = a.device
      ? [this.limiter.peek(a.device, b.perDevice)]
      : [
          this.limiter.peek(a.address, b.perAddress),
          ...(a.account ? [this.limiter.peek(a.account, b.perAccount)] : []),
        ];
    const wait = Math.max(0, ...(await Promise.all(checks)).map((c) => (c.available ? 0 : c.retryAfterSeconds)));
    if (wait > 0) {
      throw new AppError(
        'rate_limited',
        `Too many failed sign-in attempts; try again in ${wait >= 90 ? `${Math.ceil(wait / 60)} minutes` : `${wait} seconds`}`,
        { headers: { 'Retry-After': String(wait) } },
      );
    }
  }

  /** Counts one failed attempt against every budget it has. */
  async recordFailure(a: SignInAttempt): Promise<void> {
    const b = this.budgets;
    await Promise.all([
      this.limiter.check(a.address, b.perAddress),
      ...(a.account ? [this.limiter.check(a.account, b.perAccount)] : []),
      ...(a.device ? [this.limiter.check(a.device, b.perDevice)] : []),
    ]);
  }
}
