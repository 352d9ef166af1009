/**
 * MX resolution for outbound delivery (RFC 5321 section 5.1, RFC 7505).
 *
 * Design notes
 * - Answers are values, never thrown: `{ok:true, hosts}` or `{ok:false, permanent, reason}`. The
 *   caller bounces on permanent (NXDOMAIN, null MX, no address at all) and defers on transient
 *   (SERVFAIL, timeout, refused), exactly like an MTA's "Host or domain name not found" vs
 *   "Name service error ... try again".
 * - MX hosts come in preference order, shuffled among equal preferences so load spreads across
 *   a provider's equal-weight MX set (RFC 5321 5.1). No MX record => the domain itself is the
 *   implicit MX (A/AAAA fallback). A null MX ('.') means "accepts no mail": permanent at once.
 * - Each host carries its IPv4 addresses before IPv6: large receivers hold IPv6 senders to
 *   stricter rules (PTR, authentication), and many hosts here have no IPv6 route at all.
 * - Caching: node's resolveMx gives no TTL, so a positive answer lives for the smallest TTL of
 *   the A/AAAA records used, capped by `maxCacheTtlSeconds` (default 300) so a changed MX set is
 *   seen within minutes. Permanent failures are cached for `negativeTtlSeconds` (default 60);
 *   transient ones are not cached. Concurrent lookups of one domain share one query.
 * - The cache is a BoundedCache (least recently used dropped first) of `cacheMaxEntries`.
 */
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { promises as dnsPromises } from 'node:dns';
import net from 'node:net';

export interface MxHost {
  exchange: string;
  priority: number;
  /** IPv4 first, then IPv6. */
  addresses: string[];
}

export type ResolveResult = { ok: true; hosts: MxHost[] } | { ok: false; permanent: boolean; reason: string };

export interface MxResolverOptions {
  /** DNS servers as 'host:port', '[::1]:53' or a bare IP; default: the system resolver's. */
  servers?: string[];
  /** Maximum number of cached domains; default 10000. */
  cacheMaxEntries?: number;
  /** Upper bound for caching a positive answer, in seconds; default 300. */
  maxCacheTtlSeconds?: number;
  /** How long NXDOMAIN / null MX / no-address answers are cached, in seconds; default 60. */
  negativeTtlSeconds?: number;
  /** Per-query timeout in ms (c-ares, per try); default 5000. */
  timeoutMs?: number;
  /** Tries per server; default 2. */
  tries?: number;
  /** Clock in ms; default Date.now. */
  now?: () => number;
  /** Random source in [0,1) for shuffling equal preferences; default Math.random. */
  random?: () => number;
}

interface CacheEntry {
  result: ResolveResult;
  expiresAt: number;
}

type Lookup<T> = { ok: true; value: T } | { ok: false; code: string };

const NEGATIVE_CODES = new Set(['ENOTFOUND', 'ENODATA']);

export class MxResolver {
  private readonly resolver: dnsPromises.Resolver;
  private readonly cache: BoundedCache<string, CacheEntry>;
  private readonly inflight = new Map<string, Promise<ResolveResult>>();
  private readonly maxTtl: number;
  private readonly negativeTtl: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(options: MxResolverOptions = {}) {
    this.resolver = new dnsPromises.Resolver({ timeout: options.timeoutMs ?? 5000, tries: options.tries ?? 2 });
    if (options.servers?.length) this.resolver.setServers(options.servers);
    this.cache = new BoundedCache(options.cacheMaxEntries ?? 10_000);
    this.maxTtl = options.maxCacheTtlSeconds ?? 300;
    this.negativeTtl = options.negativeTtlSeconds ?? 60;
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  /** Resolves the delivery hosts of a (lower-cased, ASCII/punycode) domain. */
  async resolve(domain: string): Promise<ResolveResult> {
    const key = domain.trim().toLowerCase().replace(/\.$/, '');
    const hit = this.cache.get(key);
    if (hit) {
      if (hit.expiresAt > this.now()) {
        return reshuffle(hit.result, this.random);
      }
      this.cache.delete(key);
    }
    const pending = this.inflight.get(key);
    if (pending) return pending;
    const p = this.lookup(key).finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }

  /** Drops cached answers: one domain, or everything. */
  clear(domain?: string): void {
    if (domain) this.cache.delete(domain.toLowerCase());
    else this.cache.clear();
  }

  private async lookup(domain: string): Promise<ResolveResult> {
    const mx = await this.query(() => this.resolver.resolveMx(domain));
    if (!mx.ok) {
      if (mx.code === 'ENOTFOUND') return this.store(domain, fail(true, `NXDOMAIN: ${domain} does not exist`));
      if (mx.code !== 'ENODATA') return fail(false, `MX lookup for ${domain} failed: ${mx.code}`);
      // No MX record: the domain itself is the implicit MX (RFC 5321 5.1).
      const fallback = await this.addresses(domain);
      if (!fallback.ok) {
        return fallback.permanent
          ? this.store(domain, fail(true, `${domain} has no MX and no A/AAAA records`))
          : fail(false, `A/AAAA lookup for ${domain} failed: ${fallback.code}`);
      }
      return this.store(
        domain,
        { ok: true, hosts: [{ exchange: domain, priority: 0, addresses: fallback.addresses }] },
        fallback.ttl,
      );
    }

    const records = mx.value.filter((r) => r.exchange !== '' && r.exchange !== '.');
    if (records.length === 0) {
      // Null MX (RFC 7505), or an empty answer that amounts to one.
      return this.store(domain, fail(true, `${domain} accepts no mail (null MX, RFC 7505)`));
    }

    const ordered = orderByPreference(
      records.map((r) => ({ exchange: r.exchange.toLowerCase().replace(/\.$/, ''), priority: r.priority })),
      this.random,
    );
    const resolved = await Promise.all(ordered.map((h) => this.addresses(h.exchange)));
    const hosts: MxHost[] = [];
    let ttl = Number.POSITIVE_INFINITY;
    let transient: string | undefined;
    ordered.forEach((h, i) => {
      const r = resolved[i];
      if (!r) return;
      if (r.ok) {
        hosts.push({ ...h, addresses: r.addresses });
        ttl = Math.min(ttl, r.ttl);
      } else if (!r.permanent) {
        transient ??= `${h.exchange}: ${r.code}`;
      }
    });
    if (hosts.length === 0) {
      // Every MX host name is dead: an MTA bounces that (5.4.4) unless the failure was temporary.
      return transient
        ? fail(false, `no MX host of ${domain} could be resolved (${transient})`)
        : this.store(domain, fail(true, `no MX host of ${domain} has an address`));
    }
    return this.store(domain, { ok: true, hosts }, ttl);
  }

  /** A and AAAA of one name; permanent only when both answers are definitive negatives. */
  private async addresses(
    name: string,
  ): Promise<{ ok: true; addresses: string[]; ttl: number } | { ok: false; permanent: boolean; code: string }> {
    if (net.isIP(name)) return { ok: true, addresses: [name], ttl: this.maxTtl };
    const [v4, v6] = await Promise.all([
      this.query(() => this.resolver.resolve4(name, { ttl: true })),
      this.query(() => this.resolver.resolve6(name, { ttl: true })),
    ]);
    const found = [...(v4.ok ? v4.value : []), ...(v6.ok ? v6.value : [])];
    if (found.length > 0) {
      return { ok: true, addresses: found.map((a) => a.address), ttl: Math.min(...found.map((a) => a.ttl)) };
    }
    const codes = [v4, v6].map((r) => (r.ok ? 'ENODATA' : r.code));
    const permanent = codes.every((c) => NEGATIVE_CODES.has(c));
    return { ok: false, permanent, code: codes.find((c) => !NEGATIVE_CODES.has(c)) ?? codes[0] ?? 'ENODATA' };
  }

  private async query<T>(fn: () => Promise<T>): Promise<Lookup<T>> {
    try {
      return { ok: true, value: await fn() };
    } catch (err) {
      return { ok: false, code: (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN' };
    }
  }

  private store(domain: string, result: ResolveResult, ttlSeconds?: number): ResolveResult {
    const ttl = result.ok ? Math.min(ttlSeconds ?? this.maxTtl, this.maxTtl) : this.negativeTtl;
    if (ttl > 0) {
      this.cache.set(domain, { result, expiresAt: this.now() + ttl * 1000 });
    }
    return result;
  }
}

function fail(permanent: boolean, reason: string): ResolveResult {
  return { ok: false, permanent, reason };
}

/** Sorts by preference, shuffling (Fisher-Yates) within each group of equal preference. */
function orderByPreference<T extends { priority: number }>(items: T[], random: () => number): T[] {
  const shuffled = [...items];
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j] as T, shuffled[i] as T];
  }
  // Array#sort is stable, so the shuffle survives inside each preference group.
  return shuffled.sort((a, b) => a.priority - b.priority);
}

/** A cached answer is re-shuffled on every hit so equal-preference hosts keep sharing load. */
function reshuffle(result: ResolveResult, random: () => number): ResolveResult {
  return result.ok ? { ok: true, hosts: orderByPreference(result.hosts, random) } : result;
}
