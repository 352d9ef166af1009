import { randomInt } from 'node:crypto';
import type { Config } from '../../config.ts';
import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { SendingDomainsTable } from '../../db/schema.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { nowIso } from '../../lib/clock.ts';
import { decryptSecret, encryptSecret } from '../../lib/crypto.ts';
import { AppError, notFound, validationError } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { generateDkimKey } from './dkim-keygen.ts';
import {
  buildRecords,
  type CheckResult,
  completeRecords,
  DnsChecker,
  type DnsRecord,
  RETURN_PATH_LABEL,
} from './dns-records.ts';
import { candidateDomains, normalizeDomain } from './domain-names.ts';
import {
  TrackingHostOwners,
  trackingBaseFor,
  validTrackingHostname,
  verifiedTrackingHost,
  withTrackingHost,
} from './tracking-host.ts';
import {
  countDomains,
  deleteDomain,
  findDomain,
  findDomainByName,
  findDomainLimit,
  findDomainsNamed,
  findVerifiedOwner,
  insertDomain,
  lockTenant,
  updateDomain,
} from './domains.repo.ts';
import { VerifiedDomainsCache } from './sender-policy.ts';
import type { SigningKey } from './signing-key.ts';

export type DomainStatus = SendingDomainsTable['status'];

export interface DomainView {
  id: string;
  domain: string;
  status: DomainStatus;
  /** Why the domain is not verified; null when verified or never checked. */
  status_reason: string | null;
  dkim_selector: string;
  return_path_domain: string;
  dns_records: DnsRecord[];
  verified_at: string | null;
  created_at: string;
  updated_at: string;
}

/** Validated input plus its freshly made key pair (made before the create transaction opens). */
export interface PreparedDomain {
  domain: string;
  selector: string;
  privateKeyPem: string;
  publicKeyBase64: string;
  /**
   * Why create() must refuse, found before making a key (cap reached, already added). Thrown by
   * create() rather than prepare() so an Idempotency-Key replay still gets its first answer.
   */
  refusal?: AppError;
}

export type DomainsConfig = Pick<Config, 'devMode' | 'dnsServers' | 'bounceHost' | 'maxDomainsPerTenant' | 'publicUrl'>;

/** How long a signing-key answer (including "none") is reused by this node. */
const SIGNING_CACHE_MS = 10_000;
const SIGNING_CACHE_MAX_TENANTS = 10_000;
const MAX_NAME = 253;

function toView(row: SendingDomainsTable): DomainView {
  return {
    id: row.id,
    domain: row.domain,
    status: row.status,
    status_reason: row.status_reason,
    dkim_selector: row.dkim_selector,
    return_path_domain: row.return_path_domain,
    dns_records: JSON.parse(row.records) as DnsRecord[],
    verified_at: row.verified_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** A DNS label that sorts by month (rotation later adds a new selector beside the old one). */
function newSelector(now = new Date()): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let rand = '';
  for (let i = 0; i < 6; i++) rand += alphabet[randomInt(alphabet.length)];
  return `py${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, '0')}${rand}`;
}

function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

const alreadyAdded = (domain: string) =>
  validationError([{ field: 'domain', message: `${domain} is already a sending domain of this account` }]);

const limitReached = (limit: number) =>
  new AppError(
    'domain_limit_reached',
    `This account has reached its limit of ${limit} sending domains; delete one or ask the operator to raise the limit`,
  );

/**
 * Sending domains: a per-domain RSA-2048 DKIM key (private half sealed with the master key), the
 * DNS records to publish, verification against DNS, and the lookups used when accepting
 * (sender policy) and delivering (signing keys) mail. See docs/domains.md.
 */
export class DomainsService {
  /** Shared with the sender policy (createSenderPolicy) so changes here apply at once. */
  readonly verifiedCache = new VerifiedDomainsCache();
  /** Whose tracking links a host name answers (the tracking routes ask); kept fresh like verifiedCache. */
  readonly trackingHosts: TrackingHostOwners;
  private readonly checker: DnsChecker;
  private readonly signing = new BoundedCache<string, Map<string, { value: SigningKey | null; expiresAt: number }>>(
    SIGNING_CACHE_MAX_TENANTS,
  );
  /** Key generations this process has queued per tenant: they count against its cap. */
  private readonly generating = new Map<string, number>();

  constructor(
    private readonly db: Executor,
    private readonly cursors: CursorCodec,
    private readonly masterKey: Buffer,
    private readonly config: DomainsConfig,
  ) {
    this.checker = new DnsChecker({ servers: config.dnsServers });
    this.trackingHosts = new TrackingHostOwners(db, config.devMode);
  }

  /**
   * Validates the request and makes the key pair, outside any transaction (keygen takes ~100 ms
   * of a thread, and waits its turn: dkim-keygen.ts). A tenant at its cap, or whose queued
   * creations would take it there, gets no key and create() refuses it.
   */
  async prepare(tenantId: string, input: { domain?: unknown }): Promise<PreparedDomain> {
    const raw = typeof input.domain === 'string' ? input.domain : '';
    const domain = normalizeDomain(raw);
    if (!domain) {
      throw validationError([{ field: 'domain', message: 'domain must be a valid domain name like mail.example.com' }]);
    }
    const selector = newSelector();
    if (`${selector}._domainkey.${domain}`.length > MAX_NAME || `_dmarc.${domain}`.length > MAX_NAME) {
      throw validationError([{ field: 'domain', message: 'domain is too long to publish its DKIM record under it' }]);
    }
    const noKey = { domain, selector, privateKeyPem: '', publicKeyBase64: '' };
    if (await findDomainByName(this.db, tenantId, domain)) return { ...noKey, refusal: alreadyAdded(domain) };
    const limit = await this.limitOf(this.db, tenantId);
    const queued = this.generating.get(tenantId) ?? 0;
    if ((await countDomains(this.db, tenantId)) + queued >= limit) return { ...noKey, refusal: limitReached(limit) };
    this.generating.set(tenantId, queued + 1);
    try {
      const key = await generateDkimKey();
      return { domain, selector, ...key };
    } finally {
      const left = (this.generating.get(tenantId) ?? 1) - 1;
      if (left > 0) this.generating.set(tenantId, left);
      else this.generating.delete(tenantId);
    }
  }

  async create(tenantId: string, prepared: PreparedDomain, db: Executor = this.db): Promise<DomainView> {
    if (prepared.refusal) throw prepared.refusal;
    if (!db.isTransaction) return db.transaction().execute((trx) => this.create(tenantId, prepared, trx));
    await lockTenant(db, tenantId);
    const limit = await this.limitOf(db, tenantId);
    if ((await countDomains(db, tenantId)) >= limit) throw limitReached(limit);
    if (await findDomainByName(db, tenantId, prepared.domain)) throw alreadyAdded(prepared.domain);
    const now = nowIso();
    const row: SendingDomainsTable = {
      tenant_id: tenantId,
      id: newId(),
      domain: prepared.domain,
      status: 'pending',
      dkim_selector: prepared.selector,
      dkim_private_key: encryptSecret(this.masterKey, prepared.privateKeyPem),
      dkim_public_key: prepared.publicKeyBase64,
      return_path_domain: `${RETURN_PATH_LABEL}.${prepared.domain}`,
      records: JSON.stringify(
        buildRecords({
          domain: prepared.domain,
          selector: prepared.selector,
          publicKeyBase64: prepared.publicKeyBase64,
          bounceHost: this.config.bounceHost,
        }),
      ),
      status_reason: null,
      verified_at: null,
      created_at: now,
      updated_at: now,
    };
    try {
      await insertDomain(db, row);
    } catch (err) {
      // A concurrent create of the same domain won the race.
      if (isUniqueViolation(err)) throw alreadyAdded(prepared.domain);
      throw err;
    }
    return toView(row);
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<DomainView>> {
    return newestFirstPage(this.db, 'sending_domains', tenantId, { limit, cursor, cursors: this.cursors }, toView);
  }

  async get(tenantId: string, id: string): Promise<DomainView> {
    const row = await findDomain(this.db, tenantId, id);
    if (!row) throw notFound('Sending domain');
    return toView(row);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await deleteDomain(this.db, tenantId, id))) throw notFound('Sending domain');
    this.invalidate(tenantId);
  }

  /**
   * Looks every record up in DNS now and stores each record's status and the domain's. DKIM is
   * the one required record. A domain already verified by another tenant cannot be verified.
   */
  async verify(tenantId: string, id: string): Promise<DomainView> {
    const row = await findDomain(this.db, tenantId, id);
    if (!row) throw notFound('Sending domain');
    const records = completeRecords(JSON.parse(row.records) as DnsRecord[], {
      domain: row.domain,
      selector: row.dkim_selector,
      publicKeyBase64: row.dkim_public_key,
      bounceHost: this.config.bounceHost,
    });
    // The tracking host name's record is the tenant's choice, not one buildRecords makes: keep it.
    const tracking = (JSON.parse(row.records) as DnsRecord[]).find((r) => r.purpose === 'tracking');
    if (tracking && !records.some((r) => r.purpose === 'tracking')) records.push(tracking);
    const bounceHost = records.find((r) => r.purpose === 'return_path')?.value ?? this.config.bounceHost;
    const results = await this.checker.checkAll(records, { publicKeyBase64: row.dkim_public_key, bounceHost });
    const now = nowIso();
    const checked = records.map((r, i) => {
      const res = results[i] as CheckResult;
      return {
        ...r,
        status: res.status === 'unchanged' ? r.status : res.status,
        error: res.error,
        last_checked_at: now,
      };
    });

    const dkim = results[records.findIndex((r) => r.purpose === 'dkim')];
    let status: DomainStatus = row.status;
    let reason: string | null = row.status_reason;
    if (dkim?.status === 'verified') {
      status = 'verified';
      reason = null;
    } else if (dkim?.status === 'failed') {
      status = 'failed';
      reason = dkim.error;
    } else if (dkim && status !== 'verified') {
      reason = dkim.error;
    }
    if (status === 'verified' && (await findVerifiedOwner(this.db, row.domain, tenantId))) {
      status = 'failed';
      reason = ownedElsewhere(row.domain);
    }

    const set = {
      status,
      status_reason: reason,
      records: JSON.stringify(checked),
      verified_at: status === 'verified' ? (row.status === 'verified' ? row.verified_at : now) : null,
      updated_at: now,
    };
    let updated: boolean;
    try {
      updated = await updateDomain(this.db, tenantId, id, set);
    } catch (err) {
      // Two tenants verified the same domain at once; the partial unique index let one win.
      if (!isUniqueViolation(err)) throw err;
      Object.assign(set, { status: 'failed', status_reason: ownedElsewhere(row.domain), verified_at: null });
      updated = await updateDomain(this.db, tenantId, id, set);
    }
    if (!updated) throw notFound('Sending domain');
    this.invalidate(tenantId);
    return toView({ ...row, ...set });
  }

  /**
   * Sets (or with null removes) the domain's tracking host name (tracking-host.ts): its CNAME
   * joins the domain's DNS records, pending until the next verify finds it.
   */
  async setTrackingHostname(tenantId: string, id: string, hostname: string | null): Promise<DomainView> {
    const row = await findDomain(this.db, tenantId, id);
    if (!row) throw notFound('Sending domain');
    const host = hostname === null ? null : validTrackingHostname(row.domain, hostname, this.config.publicUrl);
    const records = withTrackingHost(JSON.parse(row.records) as DnsRecord[], host, this.config.publicUrl);
    const set = { records: JSON.stringify(records), updated_at: nowIso() };
    if (!(await updateDomain(this.db, tenantId, id, set))) throw notFound('Sending domain');
    this.invalidate(tenantId);
    return toView({ ...row, ...set });
  }

  /**
   * The DKIM key for mail of `tenantId` whose From domain is `fromDomain`: the tenant's verified
   * domain equal to it or its nearest parent (in development mode any domain, verified or not),
   * else null. Answers are cached for SIGNING_CACHE_MS per tenant and From domain.
   */
  async signingKeyFor(tenantId: string, fromDomain: string): Promise<SigningKey | null> {
    const from = fromDomain.trim().toLowerCase().replace(/\.$/, '');
    let perTenant = this.signing.get(tenantId);
    const hit = perTenant?.get(from);
    const nowMs = Date.now();
    if (hit && hit.expiresAt > nowMs) return hit.value;

    const rows = await findDomainsNamed(this.db, tenantId, candidateDomains(from), !this.config.devMode);
    // Most specific first; in development mode a verified domain still wins over an unverified one.
    rows.sort(
      (a, b) => Number(b.status === 'verified') - Number(a.status === 'verified') || b.domain.length - a.domain.length,
    );
    const row = rows[0];
    let value: SigningKey | null = null;
    if (row) {
      const records = JSON.parse(row.records) as DnsRecord[];
      const returnPathVerified = records.some((r) => r.purpose === 'return_path' && r.status === 'verified');
      value = {
        domainName: row.domain,
        keySelector: row.dkim_selector,
        privateKeyPem: decryptSecret(this.masterKey, row.dkim_private_key),
        returnPathDomain: returnPathVerified ? row.return_path_domain : this.config.bounceHost,
      };
      const trackingHost = verifiedTrackingHost(records);
      if (trackingHost) value.trackingBase = trackingBaseFor(this.config.publicUrl, trackingHost);
    }
    if (!perTenant) {
      perTenant = new Map();
      this.signing.set(tenantId, perTenant);
    }
    perTenant.set(from, { value, expiresAt: nowMs + SIGNING_CACHE_MS });
    return value;
  }

  private async limitOf(db: Executor, tenantId: string): Promise<number> {
    return (await findDomainLimit(db, tenantId)) ?? this.config.maxDomainsPerTenant;
  }

  /** Drops this node's cached answers for a tenant (other nodes follow within their TTLs). */
  private invalidate(tenantId: string): void {
    this.verifiedCache.invalidate(tenantId);
    this.signing.delete(tenantId);
    this.trackingHosts.forget();
  }
}

function ownedElsewhere(domain: string): string {
  return `${domain} is already verified by another account; a domain can be verified by one account only`;
}
