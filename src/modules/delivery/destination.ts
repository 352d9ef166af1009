import { isIP } from 'node:net';
import type { SecureContext } from 'node:tls';
import { isForbiddenAddress } from '../../lib/address-guard.ts';
import type { MtaStsResolver, PolicyLookup } from './smtp/mta-sts.ts';
import { type MtaStsMode, mxMatches } from './smtp/mta-sts-policy.ts';
import type { MxResolver } from './mx-resolver.ts';
import type { PacingData } from '../pacing/pacing-data.ts';
import { siteFor, type SiteLimits } from './shaping.ts';
import type { RelayConfig } from '../../config/relay-url.ts';
import { type AttemptResult, openSession, type SessionOptions, type SmtpSession } from './smtp/smtp-client.ts';

/** Where messages for one recipient domain go: the MX hosts in order, or the relay. */
export interface Route {
  /** What limits and suspensions are counted under (shaping.ts): gmail, ..., or example.net. */
  site: string;
  /** The pacing profile whose limits apply (tenant overrides name it); `relay` for a relay. */
  profile: string;
  limits: SiteLimits;
  hosts: { host: string; addresses: string[]; port: number }[];
  relay: RelayConfig | null;
  /**
   * How sessions on this route do TLS (docs/operations.md "Outbound TLS"): a relay requires it, verified unless the
   * relay URL opts out; an MX under an MTA-STS `enforce` policy requires it verified; any other
   * MX gets opportunistic STARTTLS (the certificate is checked and recorded, not required).
   */
  tls: Pick<SessionOptions, 'tlsMode' | 'verifyCertificate' | 'secureContext'>;
  /** The MTA-STS lookup for the domain (MX routes with MTA-STS on); null for a relay. */
  mtaSts: PolicyLookup | null;
}

export type RouteResult =
  | { ok: true; route: Route }
  | { ok: false; permanent: boolean; reason: string; enhancedCode: string; mtaSts?: MtaStsMode };

export interface RoutingOptions {
  resolver: MxResolver;
  relay: RelayConfig | null;
  mxPort: number;
  /** Site profiles and limits (docs/pacing.md); default: the shipped config/pacing.yaml. */
  shaping?: PacingData;
  /**
   * Connect to MX hosts on loopback, private, link-local or metadata addresses. Off outside
   * development: a domain whose MX points inside our network would otherwise turn delivery into
   * an SSRF probe (someone adds a domain with `MX 10 169.254.169.254.nip.io` and sends to it).
   */
  allowPrivate?: boolean;
  /** MTA-STS policies (RFC 8461) of recipient domains; null/absent = not looked up. */
  mtaSts?: MtaStsResolver | null;
  /** Trusted CAs for certificate checks (Node's roots plus POSTYARD_EXTRA_CA_FILE). */
  secureContext?: SecureContext;
}

/** MX lookup (or the relay) for a recipient domain. Null MX and NXDOMAIN are permanent. */
export async function routeFor(domain: string, o: RoutingOptions): Promise<RouteResult> {
  if (o.relay) {
    return {
      ok: true,
      route: {
        site: 'relay',
        profile: 'relay',
        // A relay is the operator's own infrastructure: more connections, long reuse, and its
        // own rate limits (the relay paces what leaves it).
        limits: {
          maxConnections: 10,
          maxMessagesPerConnection: 1000,
          messagesPerMinute: Number.MAX_SAFE_INTEGER,
          messagesPerHour: Number.MAX_SAFE_INTEGER,
        },
        hosts: [{ host: o.relay.host, addresses: [], port: o.relay.port }],
        relay: o.relay,
        tls:
          o.relay.tls === 'none'
            ? { tlsMode: 'none' }
            : { tlsMode: 'required', verifyCertificate: o.relay.verify, ...trust(o) },
        mtaSts: null,
      },
    };
  }
  const [r, sts] = await Promise.all([o.resolver.resolve(domain), o.mtaSts ? o.mtaSts.policyFor(domain) : null]);
  if (!r.ok) {
    // RFC 7505 null MX / no such domain: 5.1.10 / 5.1.2 (bad destination), else transient.
    return {
      ok: false,
      permanent: r.permanent,
      reason: r.reason,
      enhancedCode: /null mx/i.test(r.reason) ? '5.1.10' : '5.1.2',
    };
  }
  const hosts = o.allowPrivate
    ? r.hosts
    : r.hosts
        .map((h) => ({ ...h, addresses: h.addresses.filter((a) => !isForbiddenAddress(a)) }))
        .filter((h) => h.addresses.length > 0);
  if (hosts.length === 0) {
    return {
      ok: false,
      permanent: true,
      reason: `the MX hosts of ${domain} resolve only to loopback, private or reserved addresses`,
      enhancedCode: '5.4.4',
    };
  }
  const policy = sts?.policy ?? null;
  const enforce = policy?.mode === 'enforce';
  // RFC 8461 4.1: under enforce, only MX hosts the policy names are candidates.
  const allowed = enforce ? hosts.filter((h) => mxMatches(h.exchange, policy.mx)) : hosts;
  if (allowed.length === 0) {
    return {
      ok: false,
      permanent: false,
      reason: `no MX host of ${domain} (${hosts.map((h) => h.exchange).join(', ')}) matches its MTA-STS policy (mx ${policy?.mx.join(' ')}); not delivering elsewhere`,
      enhancedCode: '4.7.5',
      mtaSts: 'enforce',
    };
  }
  const first = allowed[0]?.exchange ?? domain;
  const { site, profile, limits } = siteFor(first, o.shaping);
  return {
    ok: true,
    route: {
      site,
      profile,
      limits,
      hosts: allowed.map((h) => ({ host: h.exchange, addresses: h.addresses, port: o.mxPort })),
      relay: null,
      tls: enforce
        ? { tlsMode: 'required', verifyCertificate: true, ...trust(o) }
        : { tlsMode: 'opportunistic', ...trust(o) },
      mtaSts: sts,
    },
  };
}

const trust = (o: RoutingOptions) => (o.secureContext ? { secureContext: o.secureContext } : {});

/** The address families (4, 6) of a route's hosts; a host resolved only at connect time counts as both. */
export function routeFamilies(route: Route): Set<number> {
  const out = new Set<number>();
  for (const h of route.hosts) {
    if (h.addresses.length === 0) return new Set([4, 6]);
    for (const a of h.addresses) out.add(isIP(a));
  }
  return out;
}

export interface OpenedSession {
  session: SmtpSession;
  host: string;
  address: string | null;
}

/**
 * Opens a session to the first MX host/address that answers, in preference order (then the A/AAAA
 * fallback the resolver already folded in). Returns the last failure when none does.
 */
export async function connectRoute(
  route: Route,
  base: Pick<SessionOptions, 'ehloName' | 'timeouts' | 'localAddress'>,
): Promise<
  | { ok: true; opened: OpenedSession }
  | { ok: false; failure: AttemptResult & { ok: false }; host: string | null; address: string | null }
> {
  let last: { failure: AttemptResult & { ok: false }; host: string | null; address: string | null } | null = null;
  // A bound source address reaches only destinations of its own family (IP pools): an IPv6
  // source cannot connect to an IPv4 MX address, so those are not tried.
  const family = base.localAddress ? isIP(base.localAddress) : 0;
  let skipped = 0;
  for (const h of route.hosts) {
    const all = h.addresses.length ? h.addresses : [null];
    const addresses = family ? all.filter((a) => a === null || isIP(a) === family) : all;
    skipped += all.length - addresses.length;
    for (const address of addresses) {
      const session = await openSession({
        ...base,
        host: h.host,
        ...(address ? { address } : {}),
        port: h.port,
        ...route.tls,
        ...(route.relay ? { secure: route.relay.secure, ...(route.relay.auth ? { auth: route.relay.auth } : {}) } : {}),
      });
      if (!session.connectFailure) return { ok: true, opened: { session, host: h.host, address } };
      last = { failure: session.connectFailure, host: h.host, address };
      await session.close();
    }
  }
  return {
    ok: false,
    failure: last?.failure ?? {
      ok: false,
      permanent: false,
      response: skipped
        ? `no address of ${route.hosts.map((h) => h.host).join(', ')} is IPv${family} like the source address ${base.localAddress}`
        : 'no MX host to try',
      tls: false,
      transcript: [],
      stage: 'connect',
    },
    host: last?.host ?? null,
    address: last?.address ?? null,
  };
}
