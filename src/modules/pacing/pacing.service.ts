import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import { isoAt } from '../../lib/clock.ts';
import { AppError } from '../../lib/errors.ts';
import { GRANT_TTL_MS, type RateLedger } from './ledger.ts';
import { LIMIT_FIELDS, type PacingData, type SiteLimits, type SiteProfile } from './pacing-data.ts';
import {
  activeSuspensions,
  allOverrides,
  getOverride,
  type OverrideRow,
  pruneSuspensions,
  putOverride,
  type SuspensionRow,
  upsertSuspension,
} from './pacing.repo.ts';

export type LimitField = (typeof LIMIT_FIELDS)[number][0];
export type LimitsBody = Record<LimitField, number | null>;

export interface SiteView extends LimitsBody {
  site: string;
  mx: string[];
  /** The shipped (operator's file) values. */
  defaults: Record<LimitField, number>;
  /** What applies to this tenant now: its override where set, else the default. */
  effective: Record<LimitField, number>;
  updated_at: string | null;
}

/** The reason shown for a suspension at a site named after a recipient domain (listSuspensions). */
export const WITHHELD_REASON = 'withheld: the destination is not a named site';

export interface SuspensionView {
  site: string;
  /** null: the host's default route (no source address bound). */
  source_address: string | null;
  rule: string;
  action: string;
  factor: number;
  reason: string;
  started_at: string;
  until: string;
}

/** Where a message is about to go: the pacing decision's inputs. */
export interface PaceTarget {
  /** Counting key (route.site): a profile name, or example.net for `default` destinations. */
  site: string;
  /** The profile whose limits apply (route.profile). */
  profile: string;
  /** '' = the host's default route. */
  source: string;
  tenant: string;
}

/**
 * What the automation rules are tested on: the reply we recorded and the server's last lines (a
 * `421 ... [TSS04]` followed by a close is recorded as "connection closed by the server").
 */
export function replyText(r: { response: string; transcript: string[] }): string {
  const server = r.transcript.filter((l) => l.startsWith('S: ')).slice(-3);
  return [r.response, ...server.map((l) => l.slice(3))].join('\n');
}

/** How often a worker reloads overrides and suspensions: the contract allows changes 5 s. */
const REFRESH_MS = 2_000;
/** Overrides kept in memory at most (tenants x sites they changed). */
const MAX_OVERRIDES = 100_000;
const EMAIL = /[^\s<>"'@]+@[^\s<>"'@]+/g;

const toBody = (fields: Record<LimitField, number | null>): LimitsBody => fields;
const fromLimits = (l: SiteLimits) =>
  Object.fromEntries(LIMIT_FIELDS.map(([f, k]) => [f, l[k]])) as Record<LimitField, number>;

/**
 * Pacing (docs/pacing.md): limits per site x source address from the data file with per-tenant
 * overrides, the automation rules that suspend or slow a site x address, and the grants that
 * keep per-minute and per-hour limits on every node. Implements the IP pools' SourceSuspensions
 * (suspendedUntil), so their picker moves mail off a suspended address.
 */
export class PacingService {
  private readonly profiles: Map<string, SiteProfile>;
  private readonly ledger: RateLedger;
  private overrides = new Map<string, OverrideRow>();
  private tenantsWithOverrides = new Set<string>();
  private suspensions = new Map<string, { row: SuspensionRow; untilMs: number }>();
  /** Per bucket: grants taken from the ledger and not yet used, and until when they are good. */
  private readonly credits = new Map<string, { n: number; expires: number }>();
  /** Per bucket: the ledger said no until `until`; `queued` messages were told to wait since. */
  private readonly blocked = new Map<string, { until: number; queued: number; perMinute: number }>();
  private timer: NodeJS.Timeout | null = null;
  private refreshing: Promise<void> | null = null;

  constructor(
    private readonly database: Database,
    readonly data: PacingData,
    private readonly logger: Logger,
    /** Chosen by the container: in memory on one node (SQLite), in the database across nodes. */
    ledger: RateLedger,
  ) {
    this.profiles = new Map(data.sites.map((s) => [s.name, s]));
    this.ledger = ledger;
  }

  /** Keeps this node's copy of overrides and suspensions fresh (worker role). */
  async start(): Promise<void> {
    if (this.timer) return;
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  refresh(): Promise<void> {
    this.refreshing ??= (async () => {
      try {
        const now = Date.now();
        const [rows, susp] = await Promise.all([
          allOverrides(this.database.db, MAX_OVERRIDES),
          activeSuspensions(this.database.db, isoAt(now)),
        ]);
        this.overrides = new Map(rows.map((r) => [`${r.tenant_id}|${r.site}`, r]));
        this.tenantsWithOverrides = new Set(rows.map((r) => r.tenant_id));
        this.suspensions = new Map(
          susp.map((r) => [`${r.site}|${r.source_address}`, { row: r, untilMs: Date.parse(r.until) }]),
        );
        if (Math.random() < 0.01) await pruneSuspensions(this.database.db, isoAt(now - 86_400_000));
      } catch (err) {
        this.logger.error({ err }, 'pacing: reloading overrides and suspensions failed');
      } finally {
        this.refreshing = null;
      }
    })();
    return this.refreshing;
  }

  /** SourceSuspensions: epoch ms until which `address` must not send to `site`, or null. */
  suspendedUntil(site: string, address: string | null, nowMs = Date.now()): number | null {
    const s = this.suspensions.get(`${site}|${address ?? ''}`);
    return s && s.row.action === 'suspend' && s.untilMs > nowMs ? s.untilMs : null;
  }

  /** True while `address` (null = default route) is suspended for `site`. */
  isSuspended(site: string, address: string | null, nowMs = Date.now()): boolean {
    return this.suspendedUntil(site, address, nowMs) !== null;
  }

  private factor(site: string, source: string, nowMs: number): number {
    const s = this.suspensions.get(`${site}|${source}`);
    return s && s.row.action === 'slow' && s.untilMs > nowMs ? s.row.factor : 1;
  }

  /** Whether the tenant has an override for any site (its mail then gets its own sessions). */
  hasOverrides(tenant: string): boolean {
    return this.tenantsWithOverrides.has(tenant);
  }

  /** The limits for a tenant's mail to a profile, and the scope its counters are kept under. */
  limitsFor(tenant: string, profile: string, base: SiteLimits): { limits: SiteLimits; scope: string } {
    const o = this.overrides.get(`${tenant}|${profile}`);
    if (!o) return { limits: base, scope: '' };
    const limits = { ...base };
    for (const [f, k] of LIMIT_FIELDS) {
      const v = o[f];
      if (v !== null) limits[k] = v;
    }
    // An override gives the tenant its own allowance at this site x address (docs/pacing.md).
    return { limits, scope: tenant };
  }

  /**
   * May one message go to `t` now? null = yes (a grant was used); else the epoch ms at which it
   * should be tried again. Messages told to wait while a bucket is full are spread over the
   * following minutes at the bucket's per-minute rate, so they do not all come back at once.
   */
  async acquire(t: PaceTarget, base: SiteLimits, nowMs = Date.now()): Promise<number | null> {
    const suspended = this.suspendedUntil(t.site, t.source, nowMs);
    if (suspended !== null) return suspended;
    const { limits, scope } = this.limitsFor(t.tenant, t.profile, base);
    const f = this.factor(t.site, t.source, nowMs);
    const perMinute = Math.max(1, Math.floor(limits.messagesPerMinute * f));
    const perHour = Math.max(1, Math.floor(limits.messagesPerHour * f));
    const bucket = `${t.site}|${t.source}|${scope}|${perMinute}|${perHour}`;
    const credit = this.credits.get(bucket);
    if (credit && credit.n > 0 && credit.expires > nowMs) {
      credit.n--;
      return null;
    }
    const b = this.blocked.get(bucket);
    if (b && b.until > nowMs) {
      b.queued++;
      return b.until + Math.floor(b.queued / b.perMinute) * 60_000;
    }
    // About one second's worth per trip to the ledger: few trips, little left unused.
    const chunk = Math.min(50, Math.max(1, Math.floor(perMinute / 60)));
    const ledgerBucket = `${t.site}|${t.source}|${scope}`;
    const g = await this.ledger.take(ledgerBucket, chunk, { perMinute, perHour }, nowMs);
    if (g.granted > 0) {
      this.credits.set(bucket, { n: g.granted - 1, expires: nowMs + GRANT_TTL_MS });
      this.blocked.delete(bucket);
      return null;
    }
    const until = nowMs + g.retryInMs;
    this.blocked.set(bucket, { until, queued: 0, perMinute });
    return until;
  }

  /**
   * A reply from `site` to mail from `source`: the first automation rule that matches suspends or
   * slows that site x address (every node sees it within REFRESH_MS; this node at once).
   */
  async observe(site: string, profile: string, source: string, reply: string, nowMs = Date.now()) {
    for (const rule of this.data.rules) {
      if (rule.sites && !rule.sites.includes(profile)) continue;
      if (!rule.match.test(reply)) continue;
      const until = nowMs + rule.durationMs;
      const key = `${site}|${source}`;
      const current = this.suspensions.get(key);
      if (current && current.untilMs >= until - 1000) return current.row;
      const row: SuspensionRow = {
        site,
        source_address: source,
        action: rule.action,
        factor: rule.factor,
        rule: rule.id,
        // Replies can quote a recipient: never shown to tenants that way.
        reason: reply.replace(EMAIL, '<address>').slice(0, 500),
        started_at: isoAt(nowMs),
        until: isoAt(until),
      };
      this.suspensions.set(key, { row, untilMs: until });
      this.logger.warn({ site, source: source || null, rule: rule.id, until: row.until }, 'pacing: automation rule');
      try {
        await upsertSuspension(this.database.db, row);
      } catch (err) {
        this.logger.error({ err }, 'pacing: storing a suspension failed');
      }
      return row;
    }
    return null;
  }

  // API (docs/api.md "Pacing")

  profile(site: string): SiteProfile {
    const p = this.profiles.get(site);
    if (!p) throw new AppError('not_found', `No destination site named ${site}`);
    return p;
  }

  sites(): SiteProfile[] {
    return this.data.sites;
  }

  async getSite(tenantId: string, site: string): Promise<SiteView> {
    const p = this.profile(site);
    return this.view(p, await getOverride(this.database.db, tenantId, site));
  }

  async listSites(tenantId: string): Promise<SiteView[]> {
    const mine = (await allOverrides(this.database.db, MAX_OVERRIDES)).filter((o) => o.tenant_id === tenantId);
    return this.data.sites.map((p) =>
      this.view(
        p,
        mine.find((o) => o.site === p.name),
      ),
    );
  }

  async putSite(tenantId: string, site: string, body: Partial<LimitsBody>): Promise<SiteView> {
    const p = this.profile(site);
    const row: OverrideRow = {
      tenant_id: tenantId,
      site: p.name,
      max_connections: body.max_connections ?? null,
      messages_per_connection: body.messages_per_connection ?? null,
      messages_per_minute: body.messages_per_minute ?? null,
      messages_per_hour: body.messages_per_hour ?? null,
      updated_at: isoAt(Date.now()),
    };
    await this.database.db.transaction().execute((trx) => putOverride(trx, row));
    return this.view(p, row);
  }

  /**
   * Every tenant sees every suspension (an address's reputation is shared), but a site that is not
   * one of the named profiles is named after a recipient's mail domain (smallcorp.example): shown as
   * it stands, it would tell one tenant where another tenant sends, and the reply text can name that
   * domain too. Such sites are listed under their profile's name with the reason withheld.
   */
  async listSuspensions(): Promise<SuspensionView[]> {
    const rows = await activeSuspensions(this.database.db, isoAt(Date.now()));
    const fallback = (this.data.sites.at(-1) as SiteProfile).name;
    return rows.map((r) => ({
      site: this.profiles.has(r.site) ? r.site : fallback,
      source_address: r.source_address || null,
      rule: r.rule,
      action: r.action,
      factor: r.factor,
      reason: this.profiles.has(r.site) ? r.reason : WITHHELD_REASON,
      started_at: r.started_at,
      until: r.until,
    }));
  }

  private view(p: SiteProfile, o: OverrideRow | undefined): SiteView {
    const defaults = fromLimits(p.limits);
    const own = toBody({
      max_connections: o?.max_connections ?? null,
      messages_per_connection: o?.messages_per_connection ?? null,
      messages_per_minute: o?.messages_per_minute ?? null,
      messages_per_hour: o?.messages_per_hour ?? null,
    });
    const effective = { ...defaults };
    for (const [f] of LIMIT_FIELDS) effective[f] = own[f] ?? defaults[f];
    return { site: p.name, mx: p.mx, ...own, defaults, effective, updated_at: o?.updated_at ?? null };
  }
}
