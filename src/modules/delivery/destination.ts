import { isForbiddenAddress } from '../../lib/address-guard.ts';
import { classifyBounce } from './bounce-rules.ts';
import type { MxResolver } from './mx-resolver.ts';
import type { AttemptRecord } from './outcomes.ts';
import { siteFor, type SiteLimits } from './shaping.ts';
import {
  type AttemptResult,
  openSession,
  type RelayConfig,
  type SessionOptions,
  type SmtpSession,
} from './smtp-client.ts';

/** Where messages for one recipient domain go: the MX hosts in order, or the relay. */
export interface Route {
  site: string;
  limits: SiteLimits;
  hosts: { host: string; addresses: string[]; port: number }[];
  relay: RelayConfig | null;
}

export type RouteResult =
  | { ok: true; route: Route }
  | { ok: false; permanent: boolean; reason: string; enhancedCode: string };

export interface RoutingOptions {
  resolver: MxResolver;
  relay: RelayConfig | null;
  mxPort: number;
  /**
   * Connect to MX hosts on loopback, private, link-local or metadata addresses. Off outside
   * development: a domain whose MX points inside our network would otherwise turn delivery into
   * an SSRF probe (someone adds a domain with `MX 10 169.254.169.254.nip.io` and sends to it).
   */
  allowPrivate?: boolean;
}

/** MX lookup (or the relay) for a recipient domain. Null MX and NXDOMAIN are permanent. */
export async function routeFor(domain: string, o: RoutingOptions): Promise<RouteResult> {
  if (o.relay) {
    return {
      ok: true,
      route: {
        site: 'relay',
        // A relay is the operator's own infrastructure: more connections, long reuse.
        limits: { maxConnections: 10, maxMessagesPerConnection: 1000 },
        hosts: [{ host: o.relay.host, addresses: [], port: o.relay.port }],
        relay: o.relay,
      },
    };
  }
  const r = await o.resolver.resolve(domain);
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
  const first = hosts[0]?.exchange ?? domain;
  const { site, limits } = siteFor(first);
  return {
    ok: true,
    route: {
      site,
      limits,
      hosts: hosts.map((h) => ({ host: h.exchange, addresses: h.addresses, port: o.mxPort })),
      relay: null,
    },
  };
}

/** Counting semaphore per site: connection limits hold across all domains of one site. */
export class SiteSlots {
  private readonly used = new Map<string, number>();

  tryAcquire(site: string, max: number): boolean {
    const n = this.used.get(site) ?? 0;
    if (n >= max) return false;
    this.used.set(site, n + 1);
    return true;
  }

  release(site: string): void {
    const n = (this.used.get(site) ?? 1) - 1;
    if (n <= 0) this.used.delete(site);
    else this.used.set(site, n);
  }
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
  base: Pick<SessionOptions, 'ehloName' | 'timeouts'>,
): Promise<
  | { ok: true; opened: OpenedSession }
  | { ok: false; failure: AttemptResult & { ok: false }; host: string | null; address: string | null }
> {
  let last: { failure: AttemptResult & { ok: false }; host: string | null; address: string | null } | null = null;
  for (const h of route.hosts) {
    const addresses = h.addresses.length ? h.addresses : [null];
    for (const address of addresses) {
      const session = await openSession({
        ...base,
        host: h.host,
        ...(address ? { address } : {}),
        port: h.port,
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
      response: 'no MX host to try',
      tls: false,
      transcript: [],
      stage: 'connect',
    },
    host: last?.host ?? null,
    address: last?.address ?? null,
  };
}

export function attemptRecord(
  startedAt: string,
  result: AttemptResult,
  host: string | null,
  address: string | null,
): AttemptRecord {
  return {
    startedAt,
    finishedAt: new Date().toISOString(),
    mxHost: host,
    address,
    tls: result.tls,
    smtpCode: result.code ?? null,
    enhancedCode: result.enhancedCode ?? null,
    response: result.response,
    transcript: result.transcript,
  };
}

/** Classification of a failed attempt: transient (defer) or a typed bounce. */
export function classifyFailure(result: AttemptResult & { ok: false }) {
  const bounce = classifyBounce({
    ...(result.code !== undefined ? { code: result.code } : {}),
    ...(result.enhancedCode !== undefined ? { enhancedCode: result.enhancedCode } : {}),
    text: result.response,
  });
  // The SMTP client knows connection-level failures are transient whatever the code says.
  return { transient: !result.permanent || bounce.transient, bounce };
}
