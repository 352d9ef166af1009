import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { isUuid } from '../lib/ids.ts';
import { relayFromUrl } from './relay-url.ts';
import { ConfigError, type Env, int, list, str } from './env.ts';

/**
 * Settings whose values are addresses, host names or URLs: each parsed and checked here, so
 * loadConfig only strings them together. A bad value throws ConfigError at start, never later
 * at the first connection that would use it.
 */

export function databaseUrlOf(env: Env): string | null {
  const databaseUrl = str(env, 'DATABASE_URL') ?? null;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must start with postgres:// or postgresql://');
  }
  return databaseUrl;
}

export function redisUrlOf(env: Env): string | null {
  const redisUrl = str(env, 'REDIS_URL') ?? null;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) throw new ConfigError('REDIS_URL', 'must start with redis://');
  return redisUrl;
}

/** Parsed in full by relay-url.ts now, so its errors (e.g. a bad ?tls=) stop the start. */
export function relayUrlOf(env: Env): string | null {
  const relayUrl = str(env, 'POSTYARD_RELAY_URL') ?? null;
  if (relayUrl && !/^smtps?:\/\/[^/]+/.test(relayUrl)) {
    throw new ConfigError('POSTYARD_RELAY_URL', 'must look like smtp://user:pass@host:port');
  }
  if (relayUrl) {
    try {
      relayFromUrl(relayUrl);
    } catch (err) {
      throw new ConfigError('POSTYARD_RELAY_URL', (err as Error).message);
    }
  }
  return relayUrl;
}

/** POSTYARD_TRUST_PROXY: IP addresses or CIDR ranges. */
export function trustProxyOf(env: Env): string[] | null {
  const trustProxy = list(env, 'POSTYARD_TRUST_PROXY');
  for (const t of trustProxy ?? []) {
    const [ip, bits, extra] = t.split('/');
    const family = isIP(ip ?? '');
    const max = family === 6 ? 128 : 32;
    if (!family || extra !== undefined || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= max))) {
      throw new ConfigError('POSTYARD_TRUST_PROXY', `expected IP addresses or CIDR ranges, got "${t}"`);
    }
  }
  return trustProxy;
}

/** POSTYARD_SMTP_PROXY_PROTOCOL: IP addresses, or `*` for every peer. */
export function smtpProxyProtocolOf(env: Env): string[] | null {
  const smtpProxyProtocol = list(env, 'POSTYARD_SMTP_PROXY_PROTOCOL');
  for (const p of smtpProxyProtocol ?? []) {
    if (p !== '*' && !isIP(p)) {
      throw new ConfigError('POSTYARD_SMTP_PROXY_PROTOCOL', `expected IP addresses or *, got "${p}"`);
    }
  }
  return smtpProxyProtocol;
}

/** POSTYARD_DNS_SERVERS: IP addresses with an optional :port (IPv6 with a port in brackets). */
export function dnsServersOf(env: Env): string[] | null {
  const dnsServers = list(env, 'POSTYARD_DNS_SERVERS');
  for (const s of dnsServers ?? []) {
    if (!/^(\[[0-9a-fA-F:]+\]|[0-9.]+|[0-9a-fA-F:]+)(:\d+)?$/.test(s)) {
      throw new ConfigError('POSTYARD_DNS_SERVERS', `"${s}" is not an IP address with optional :port`);
    }
  }
  return dnsServers;
}

/** POSTYARD_SOURCE_ADDRESSES: IP addresses, each once (IP pools refer to them by value). */
/**
 * POSTYARD_SOURCE_ADDRESSES: `address` (shared) or `address=tenant-id` (dedicated to that tenant,
 * docs/ip-pools.md "For the operator"), comma-separated. IPv6 addresses are kept in lower case,
 * the form pools and the routing table compare.
 */
function sourceEntriesOf(env: Env): { address: string; tenantId: string | null }[] {
  const entries: { address: string; tenantId: string | null }[] = [];
  const seen = new Map<string, string | null>();
  for (const entry of list(env, 'POSTYARD_SOURCE_ADDRESSES') ?? []) {
    const eq = entry.indexOf('=');
    const raw = (eq === -1 ? entry : entry.slice(0, eq)).trim();
    const tenantId = eq === -1 ? null : entry.slice(eq + 1).trim();
    if (!isIP(raw)) throw new ConfigError('POSTYARD_SOURCE_ADDRESSES', `"${raw}" is not an IPv4 or IPv6 address`);
    if (tenantId !== null && !isUuid(tenantId))
      throw new ConfigError('POSTYARD_SOURCE_ADDRESSES', `"${entry}": after "=" comes a tenant id (a UUID)`);
    const address = isIP(raw) === 6 ? raw.toLowerCase() : raw;
    if (seen.has(address)) {
      if (seen.get(address) !== tenantId)
        throw new ConfigError('POSTYARD_SOURCE_ADDRESSES', `${address} is listed twice with different tenants`);
      continue;
    }
    seen.set(address, tenantId);
    entries.push({ address, tenantId });
  }
  return entries;
}

export function sourceAddressesOf(env: Env): string[] {
  return sourceEntriesOf(env).map((e) => e.address);
}

/** address -> tenant id, for the entries written `address=tenant-id`. */
export function sourceDedicationsOf(env: Env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of sourceEntriesOf(env)) if (e.tenantId) out[e.address] = e.tenantId;
  return out;
}

function defaultEhloName(): string {
  const h = hostname();
  // A bare single-label name is refused by real MTAs; fall back to an address literal.
  return h.includes('.') ? h : '[127.0.0.1]';
}

export function ehloNameOf(env: Env): string {
  const ehloName = str(env, 'POSTYARD_EHLO_NAME') ?? defaultEhloName();
  if (!ehloName.includes('.') && !ehloName.startsWith('[')) {
    throw new ConfigError(
      'POSTYARD_EHLO_NAME',
      'must be a fully qualified name or an address literal like [192.0.2.1]',
    );
  }
  return ehloName;
}

/** POSTYARD_BOUNCE_HOST, lower case without a trailing dot; default from the EHLO name. */
export function bounceHostOf(env: Env, ehloName: string): string {
  const bounceHost = (str(env, 'POSTYARD_BOUNCE_HOST') ?? (ehloName.startsWith('[') ? 'localhost' : ehloName))
    .toLowerCase()
    .replace(/\.$/, '');
  if (
    bounceHost !== 'localhost' &&
    !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/.test(bounceHost)
  ) {
    throw new ConfigError('POSTYARD_BOUNCE_HOST', `"${bounceHost}" is not a fully qualified host name`);
  }
  return bounceHost;
}

/** POSTYARD_PUBLIC_URL: an http(s) URL without query or fragment; trailing slashes dropped. */
export function publicUrlOf(env: Env): string {
  const raw = str(env, 'POSTYARD_PUBLIC_URL');
  if (raw === undefined) {
    const host = str(env, 'POSTYARD_HTTP_HOST') ?? '127.0.0.1';
    return `http://${host.includes(':') ? `[${host}]` : host}:${int(env, 'POSTYARD_HTTP_PORT', 3000, 0, 65535)}`;
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError('POSTYARD_PUBLIC_URL', `"${raw}" is not a URL`);
  }
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.search || u.hash || u.username) {
    throw new ConfigError('POSTYARD_PUBLIC_URL', 'must be an http(s) URL without credentials, query or fragment');
  }
  return u.href.replace(/\/+$/, '');
}
