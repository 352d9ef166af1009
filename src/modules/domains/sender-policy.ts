import type { Config } from '../../config.ts';
import type { Executor } from '../../db/executor.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { AppError } from '../../lib/errors.ts';
import { listVerifiedDomainNames } from './domains.repo.ts';
import { candidateDomains } from './domain-names.ts';

/** Checks that every sender domain may be used by the tenant; throws AppError otherwise. */
export type SenderPolicy = (db: Executor, tenantId: string, senderDomains: readonly string[]) => Promise<void>;

/** Cap on the cache's age (changes visible on every node within 5 s; docs/domains.md "4. Sending"). */
const MAX_TTL_MS = 5000;
/** Default age: well inside the 5 s bound, like the API-key cache. */
const DEFAULT_TTL_MS = 2000;
const MAX_TENANTS = 10_000;

/**
 * Per-tenant set of verified domain names, cached briefly so accepting mail costs no extra
 * query per request. The node that verifies or deletes a domain invalidates its entry at once;
 * other nodes see the change within the TTL.
 */
export class VerifiedDomainsCache {
  private readonly entries = new BoundedCache<string, { names: ReadonlySet<string>; expiresAt: number }>(MAX_TENANTS);

  constructor(private readonly ttlMs = DEFAULT_TTL_MS) {}

  async get(db: Executor, tenantId: string): Promise<ReadonlySet<string>> {
    const now = Date.now();
    const hit = this.entries.get(tenantId);
    if (hit && hit.expiresAt > now) return hit.names;
    const names = new Set(await listVerifiedDomainNames(db, tenantId));
    if (this.ttlMs > 0) {
      this.entries.set(tenantId, { names, expiresAt: now + Math.min(this.ttlMs, MAX_TTL_MS) });
    }
    return names;
  }

  invalidate(tenantId: string): void {
    this.entries.delete(tenantId);
  }
}

/**
 * The accept-time sender check (docs/domains.md "4. Sending"). Every domain the message claims
 * to be from (the From address; over SMTP every From mailbox, the Sender, every Resent-From
 * mailbox and Resent-Sender) must be a verified sending domain of the tenant, or a subdomain of
 * one: a DKIM signature by the parent domain aligns with the From under DMARC's relaxed
 * alignment, as SES allows too. `senderDomains[0]` is the domain of the From that is sent.
 *
 * Development mode lifts the verification only: the From's own domain
 * (`senderDomains[0]`) is accepted unverified, and every other identity must be on it (or a
 * subdomain of it) or on a verified domain, so a second From mailbox or a Sender on another
 * tenant's domain is refused there too.
 * Pass the DomainsService's cache so this node's verifications and deletions apply at once.
 */
export function createSenderPolicy(
  config: Pick<Config, 'devMode'>,
  cache: VerifiedDomainsCache = new VerifiedDomainsCache(),
): SenderPolicy {
  return async (db, tenantId, senderDomains) => {
    const domains = senderDomains.map((d) => d.toLowerCase());
    const own = config.devMode ? domains[0] : undefined;
    if (config.devMode) {
      // Nothing else claimed, or only the From's own domain: no query needed.
      if (own === undefined || domains.every((d) => candidateDomains(d).includes(own))) return;
    }
    const verified = await cache.get(db, tenantId);
    const allowed = (d: string) => candidateDomains(d).some((c) => c === own || verified.has(c));
    const refused = domains.length === 0 ? '' : domains.find((d) => !allowed(d));
    if (refused === undefined) return;
    throw new AppError(
      'sender_domain_not_verified',
      refused
        ? own !== undefined
          ? `The domain ${refused} is neither the From domain (${own}) nor a verified sending domain of this account`
          : `The From domain ${refused} is not a verified sending domain of this account`
        : 'The message has no From address on a verified sending domain',
      { field: 'content.from' },
    );
  };
}
