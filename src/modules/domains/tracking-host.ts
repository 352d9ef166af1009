/**
 * Tracking host names per sending domain (docs/domains.md "Tracking host name"): a tenant may
 * have the links, open pixel and https List-Unsubscribe URL of its mail use a name of its own
 * domain, e.g. `click.acme.test`, instead of POSTYARD_PUBLIC_URL's host. The name is a CNAME to
 * the public URL's host, listed with the domain's other DNS records (purpose `tracking`) and
 * verified like them; mail uses it only once verified.
 *
 * The name must be the sending domain itself or one of its subdomains (and not the return-path
 * name): a tenant can only point mail at names of a domain it proves it controls, so no tenant
 * gets another's, or the operator's, host name into its links.
 */
import type { Executor } from '../../db/executor.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { validationError } from '../../lib/errors.ts';
import { type DnsRecord, RETURN_PATH_LABEL } from './dns-records.ts';
import { candidateDomains, normalizeDomain } from './domain-names.ts';
import { findDomainsOfAnyTenant } from './domains.repo.ts';

/** The host name of POSTYARD_PUBLIC_URL: what a tracking host name's CNAME points at. */
export function publicHostOf(publicUrl: string): string {
  return new URL(publicUrl).hostname.toLowerCase();
}

/** The public URL with its host replaced by the tracking host name (scheme, port and path kept). */
export function trackingBaseFor(publicUrl: string, host: string): string {
  const u = new URL(publicUrl);
  u.hostname = host;
  return `${u.origin}${u.pathname}`.replace(/\/+$/, '');
}

/** The normalized tracking host name for `domain`, or a 422 saying why not. */
export function validTrackingHostname(domain: string, input: string, publicUrl: string): string {
  const host = normalizeDomain(input);
  const fail = (message: string) => validationError([{ field: 'tracking_hostname', message }]);
  if (!host) throw fail('is not a valid host name');
  if (host !== domain && !host.endsWith(`.${domain}`)) throw fail(`must be ${domain} or a name under it`);
  if (host === `${RETURN_PATH_LABEL}.${domain}`) throw fail('is the return-path name of this domain');
  if (host === publicHostOf(publicUrl)) throw fail("is the service's own public host name");
  return host;
}

/** The CNAME record of a tracking host name, pending until verified. */
export function trackingRecord(host: string, publicUrl: string): DnsRecord {
  return {
    purpose: 'tracking',
    type: 'CNAME',
    name: host,
    value: publicHostOf(publicUrl),
    required: false,
    status: 'pending',
    last_checked_at: null,
    error: null,
  };
}

/**
 * The records with the tracking host name set to `host` (null removes it). Setting the name it
 * already has keeps that record and its status; a new name starts pending.
 */
export function withTrackingHost(records: DnsRecord[], host: string | null, publicUrl: string): DnsRecord[] {
  const current = records.find((r) => r.purpose === 'tracking');
  if (current && current.name === host) return records;
  const others = records.filter((r) => r.purpose !== 'tracking');
  return host === null ? others : [...others, trackingRecord(host, publicUrl)];
}

/** The verified tracking host name among a domain's records, else null. */
export function verifiedTrackingHost(records: DnsRecord[]): string | null {
  return records.find((r) => r.purpose === 'tracking' && r.status === 'verified')?.name ?? null;
}

/** How long a node trusts what it found about a host name: other nodes' changes apply within it. */
const OWNERS_TTL_MS = 10_000;
const OWNERS_MAX_HOSTS = 10_000;
const HOST_NAME = /^[a-z0-9.-]{1,253}$/;

/**
 * Whose tracking links a host name may answer (a tenant's token redirected from every
 * other tenant's verified `click.<domain>`): the tenants whose sending domain has it as its
 * verified tracking host name, the domain itself verified too (in development mode, where mail
 * may come from unverified domains, any). The sending domain is the name itself or a parent of
 * it, so the lookup is by the domain index. Answers, "nobody" included, are kept OWNERS_TTL_MS.
 */
export class TrackingHostOwners {
  private readonly cache = new BoundedCache<string, { owners: ReadonlySet<string>; expiresAt: number }>(
    OWNERS_MAX_HOSTS,
  );

  constructor(
    private readonly db: Executor,
    private readonly devMode: boolean,
  ) {}

  /** The tenants owning `host` (lower case, no trailing dot) as a tracking host name; empty when none. */
  async of(host: string): Promise<ReadonlySet<string>> {
    if (!HOST_NAME.test(host)) return new Set();
    const now = Date.now();
    const hit = this.cache.get(host);
    if (hit && hit.expiresAt > now) return hit.owners;
    const rows = await findDomainsOfAnyTenant(this.db, candidateDomains(host), !this.devMode);
    const owners = new Set(
      rows.filter((r) => verifiedTrackingHost(JSON.parse(r.records) as DnsRecord[]) === host).map((r) => r.tenant_id),
    );
    this.cache.set(host, { owners, expiresAt: now + OWNERS_TTL_MS });
    return owners;
  }

  /** Drops this node's answers (a domain or its tracking host changed here). */
  forget(): void {
    this.cache.clear();
  }
}
