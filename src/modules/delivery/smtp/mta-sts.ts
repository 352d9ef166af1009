/**
 * MTA-STS policy discovery for MX delivery (RFC 8461; docs/operations.md "Outbound TLS").
 *
 * Design notes
 * - Discovery: TXT `_mta-sts.<domain>` through the configured resolver (POSTYARD_DNS_SERVERS),
 *   then `https://mta-sts.<domain>/.well-known/mta-sts.txt` over undici: certificate verified
 *   (Node's roots plus POSTYARD_EXTRA_CA_FILE), no redirects (RFC 8461 3.3), 200 and text/plain
 *   only, at most 64 KB, 10 s for the whole fetch. Port POSTYARD_MTA_STS_PORT (443; tests).
 * - SSRF: outside dev mode the policy host's addresses go through the webhook guard
 *   (src/lib/address-guard.ts), like MX addresses in destination.ts: a domain
 *   cannot make us fetch from loopback, private or metadata addresses.
 * - Cache (memory, per node; nodes on one PostgreSQL each fetch for themselves, which costs one
 *   fetch per node and domain per max_age): a policy is used until its max_age runs out. The TXT
 *   record is looked at again at most every 5 minutes per domain; a new id fetches the policy
 *   again, and a failed refresh keeps the cached policy (RFC 8461 5.1), so an attacker who
 *   blocks DNS or HTTPS cannot downgrade a domain we know enforces. With no cached policy, a
 *   missing record or a failed fetch means "no policy" (deliver as usual), remembered for 5 and
 *   1 minute respectively so busy domains do not cost a lookup per batch.
 * - Answers are values with a `note` for the attempt transcript; nothing is thrown.
 */
import { BoundedCache } from '../../../lib/bounded-cache.ts';
import { type LookupAddress, promises as dnsPromises } from 'node:dns';
import type { SecureContext } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import { createGuardedLookup } from '../../../lib/address-guard.ts';
import { checkConnectedAddress } from '../../../lib/guarded-connector.ts';
import { type MtaStsPolicy, parsePolicy, parseStsTxt } from './mta-sts-policy.ts';

export interface MtaStsOptions {
  /** DNS servers ('host:port'); default the system resolver's. */
  servers?: string[];
  /** HTTPS port of the policy host; default 443. */
  port?: number;
  /** Trusted CAs (Node's roots plus extra ones); default Node's roots. */
  secureContext?: SecureContext;
  /** Fetch from loopback/private addresses (dev mode, tests). */
  allowPrivate?: boolean;
  /** Whole fetch deadline; default 10 s. */
  timeoutMs?: number;
  /** Largest policy accepted; default 64 KB. */
  maxBytes?: number;
  now?: () => number;
  cacheMaxEntries?: number;
}

export interface PolicyLookup {
  /** The policy to apply; null = none (no record, or nothing valid could be fetched). */
  policy: MtaStsPolicy | null;
  /** What was found, for the attempt transcript. */
  note: string;
}

interface Entry {
  lookup: PolicyLookup;
  /** A policy: fetched at + max_age. No policy: when to look again. */
  expiresAt: number;
  /** When the TXT record is looked at again (a policy stays in use meanwhile). */
  recheckAt: number;
}

const RECHECK_MS = 5 * 60_000;
const NO_RECORD_MS = 5 * 60_000;
const FETCH_FAILED_MS = 60_000;
const HOST_NAME = /^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export class MtaStsResolver {
  private readonly resolver: dnsPromises.Resolver;
  private readonly agent: Agent;
  private readonly cache: BoundedCache<string, Entry>;
  private readonly inflight = new Map<string, Promise<PolicyLookup>>();
  private readonly now: () => number;

  constructor(private readonly o: MtaStsOptions = {}) {
    this.resolver = new dnsPromises.Resolver({ timeout: 5000, tries: 2 });
    if (o.servers?.length) this.resolver.setServers(o.servers);
    this.now = o.now ?? Date.now;
    this.cache = new BoundedCache(o.cacheMaxEntries ?? 10_000);
    const lookup: AllLookup = (hostname, _options, callback) => {
      this.addresses(hostname).then(
        (list) => callback(null, list),
        (err: NodeJS.ErrnoException) => callback(err, []),
      );
    };
    const guarded = o.allowPrivate ? lookupAllowingAll(lookup) : createGuardedLookup(lookup);
    const timeout = o.timeoutMs ?? 10_000;
    const base = buildConnector({
      timeout,
      lookup: guarded,
      maxCachedSessions: 0, // every connection checks the certificate and the name again
      ...(o.secureContext ? { secureContext: o.secureContext } : {}),
    } as buildConnector.BuildOptions);
    // The address actually connected to is checked too (as the webhook sender does).
    const connect = o.allowPrivate ? base : checkConnectedAddress(base);
    this.agent = new Agent({ connect, headersTimeout: timeout, bodyTimeout: timeout, keepAliveTimeout: 1000 });
  }

  /** The policy for a recipient domain (lower-case ASCII); never throws. */
  policyFor(domain: string): Promise<PolicyLookup> {
    const key = domain.toLowerCase().replace(/\.$/, '');
    const hit = this.cache.get(key);
    const now = this.now();
    if (hit && hit.expiresAt > now && hit.recheckAt > now) return Promise.resolve(hit.lookup);
    if (!HOST_NAME.test(key)) return Promise.resolve({ policy: null, note: 'MTA-STS: not a domain name' });
    const pending = this.inflight.get(key);
    if (pending) return pending;
    const p = this.refresh(key, hit && hit.expiresAt > now && hit.lookup.policy ? hit : null).finally(() =>
      this.inflight.delete(key),
    );
    this.inflight.set(key, p);
    return p;
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  private async refresh(domain: string, cached: Entry | null): Promise<PolicyLookup> {
    const now = this.now();
    const keepCached = (why: string): PolicyLookup => {
      if (!cached?.lookup.policy) return { policy: null, note: why };
      const lookup = { policy: cached.lookup.policy, note: `${describe(cached.lookup.policy)} (cached; ${why})` };
      this.store(domain, { lookup, expiresAt: cached.expiresAt, recheckAt: now + RECHECK_MS });
      return lookup;
    };
    let id: string | null;
    try {
      const records = await this.resolver.resolveTxt(`_mta-sts.${domain}`);
      id = parseStsTxt(records);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      if (code !== 'ENOTFOUND' && code !== 'ENODATA') {
        const lookup = keepCached(`MTA-STS: TXT lookup for _mta-sts.${domain} failed (${code})`);
        if (!cached) this.store(domain, { lookup, expiresAt: now + FETCH_FAILED_MS, recheckAt: now + FETCH_FAILED_MS });
        return lookup;
      }
      id = null;
    }
    if (id === null) {
      const lookup = keepCached(`MTA-STS: no policy record for ${domain}`);
      if (!cached) this.store(domain, { lookup, expiresAt: now + NO_RECORD_MS, recheckAt: now + NO_RECORD_MS });
      return lookup;
    }
    if (cached?.lookup.policy && cached.lookup.policy.id === id) return keepCached(`policy id ${id} unchanged`);
    const fetched = await this.fetchPolicy(domain, id);
    if (!fetched.ok) {
      const lookup = keepCached(`MTA-STS: policy of ${domain} (id ${id}) could not be fetched: ${fetched.error}`);
      if (!cached) this.store(domain, { lookup, expiresAt: now + FETCH_FAILED_MS, recheckAt: now + FETCH_FAILED_MS });
      return lookup;
    }
    const policy = fetched.policy;
    const lookup = { policy, note: describe(policy) };
    this.store(domain, { lookup, expiresAt: now + policy.maxAge * 1000, recheckAt: now + RECHECK_MS });
    return lookup;
  }

  /** GET https://mta-sts.<domain>/.well-known/mta-sts.txt within the limits above. */
  private async fetchPolicy(domain: string, id: string) {
    const maxBytes = this.o.maxBytes ?? 64 * 1024;
    const port = this.o.port ?? 443;
    try {
      const res = await this.agent.request({
        origin: `https://mta-sts.${domain}${port === 443 ? '' : `:${port}`}`,
        path: '/.well-known/mta-sts.txt',
        method: 'GET',
        headers: { accept: 'text/plain' },
        signal: AbortSignal.timeout(this.o.timeoutMs ?? 10_000),
      });
      if (res.statusCode !== 200) {
        await res.body.dump();
        return { ok: false as const, error: `HTTP ${res.statusCode} (redirects are not followed)` };
      }
      const type = String(res.headers['content-type'] ?? '');
      if (!/^text\/plain\s*(;|$)/i.test(type)) {
        await res.body.dump();
        return { ok: false as const, error: `content type ${JSON.stringify(type)} is not text/plain` };
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) {
          res.body.destroy();
          return { ok: false as const, error: `policy larger than ${maxBytes} bytes` };
        }
        chunks.push(chunk as Buffer);
      }
      const parsed = parsePolicy(Buffer.concat(chunks).toString('utf8'), id);
      return parsed.ok ? parsed : { ok: false as const, error: parsed.error };
    } catch (err) {
      return { ok: false as const, error: innermost(err) };
    }
  }

  private async addresses(host: string): Promise<LookupAddress[]> {
    const settle = (p: Promise<string[]>) => p.catch((err: NodeJS.ErrnoException) => err);
    const [v4, v6] = await Promise.all([settle(this.resolver.resolve4(host)), settle(this.resolver.resolve6(host))]);
    const list = [
      ...(Array.isArray(v4) ? v4.map((address) => ({ address, family: 4 })) : []),
      ...(Array.isArray(v6) ? v6.map((address) => ({ address, family: 6 })) : []),
    ];
    if (list.length === 0) throw Array.isArray(v4) ? v6 : v4;
    return list;
  }

  private store(domain: string, entry: Entry): void {
    this.cache.set(domain, entry);
  }
}

type AllLookup = (
  hostname: string,
  options: { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** The guarded lookup's shape without the address check (dev mode, private MX targets allowed). */
function lookupAllowingAll(lookup: AllLookup) {
  return (
    hostname: string,
    options: { all?: boolean },
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) =>
    lookup(hostname, { all: true }, (err, list) => {
      if (err) return callback(err, []);
      if (options.all) return callback(null, list);
      const first = list[0] as LookupAddress;
      return callback(null, first.address, first.family);
    });
}

function describe(p: MtaStsPolicy): string {
  return `MTA-STS policy id ${p.id}: mode ${p.mode}, mx ${p.mx.join(' ') || '(none)'}, max_age ${p.maxAge}`;
}

/** undici wraps connector errors; the innermost cause says what happened (e.g. the SSRF refusal). */
function innermost(err: unknown): string {
  let e = err as { cause?: unknown; message?: string; code?: string };
  for (let i = 0; i < 5 && e?.cause; i++) e = e.cause as typeof e;
  return `${e?.code ? `${e.code}: ` : ''}${e?.message ?? String(err)}`.replace(/\s+/g, ' ').slice(0, 300);
}
