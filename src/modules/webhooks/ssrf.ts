import { type LookupAddress, type LookupOptions, lookup as dnsLookup } from 'node:dns';
import { isIP } from 'node:net';

/**
 * SSRF guard for webhook targets. A customer-supplied URL must not let Postyard reach its own
 * network: loopback, private, carrier-grade NAT, link-local (cloud metadata at 169.254.169.254),
 * unspecified, multicast and reserved ranges are refused, including when written as IPv6
 * (IPv4-mapped, IPv4-compatible, NAT64, 6to4). The same predicate runs at create/PATCH time on
 * what the name resolves to, and again at connect time on the address actually connected to
 * (guardedLookup + the connector in sender.ts), so a DNS answer that changes between the two
 * (rebinding) does not get through.
 */

type Cidr4 = [number, number];
// [network as uint32, prefix length]
const V4_BLOCKED: Cidr4[] = [
  ['0.0.0.0', 8], // "this network", includes the unspecified address
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, includes broadcast
].map(([a, p]) => [v4ToInt(a as string), p as number]);

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
}

function v4Blocked(n: number): boolean {
  return V4_BLOCKED.some(([net, prefix]) => {
    const size = 2 ** (32 - prefix);
    return Math.floor(n / size) === Math.floor(net / size);
  });
}

/** 16 bytes of an IPv6 address (with an optional dotted IPv4 tail), or null. */
function v6Bytes(ip: string): number[] | null {
  let addr = ip.split('%')[0] ?? ''; // drop a zone id (fe80::1%eth0)
  let tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(addr);
  if (dotted?.[1]) {
    if (isIP(dotted[1]) !== 4) return null;
    tail = dotted[1].split('.').map(Number);
    addr = `${addr.slice(0, -dotted[1].length)}0:0`;
  }
  const halves = addr.split('::');
  if (halves.length > 2) return null;
  const parse = (s: string) => (s ? s.split(':').map((h) => Number.parseInt(h, 16)) : []);
  const head = parse(halves[0] ?? '');
  const rest = halves.length === 2 ? parse(halves[1] ?? '') : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const words = [...head, ...new Array(halves.length === 2 ? fill : 0).fill(0), ...rest];
  if (words.length !== 8 || words.some((w) => Number.isNaN(w) || w < 0 || w > 0xffff)) return null;
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

function bytesToV4(b: number[], at: number): number {
  return (((b[at] ?? 0) * 256 + (b[at + 1] ?? 0)) * 256 + (b[at + 2] ?? 0)) * 256 + (b[at + 3] ?? 0);
}

function v6Blocked(b: number[]): boolean {
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 16)) return true; // :: unspecified
  if (zeros(0, 15) && b[15] === 1) return true; // ::1 loopback
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4Blocked(bytesToV4(b, 12)); // ::ffff:a.b.c.d
  if (zeros(0, 12)) return true; // ::a.b.c.d (deprecated IPv4-compatible): never a real target
  const w0 = ((b[0] ?? 0) << 8) | (b[1] ?? 0);
  const w1 = ((b[2] ?? 0) << 8) | (b[3] ?? 0);
  if (w0 === 0x0064 && w1 === 0xff9b) return zeros(4, 12) ? v4Blocked(bytesToV4(b, 12)) : true; // NAT64
  if (w0 === 0x0100 && zeros(2, 8)) return true; // 100::/64 discard
  if (w0 === 0x2001 && w1 === 0x0db8) return true; // documentation
  if (w0 === 0x2001 && w1 === 0x0000) return true; // Teredo: tunnels to an embedded (obfuscated) IPv4
  if (w0 === 0x2002) return v4Blocked(bytesToV4(b, 2)); // 6to4 embeds an IPv4
  if ((w0 & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local
  if ((w0 & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((w0 & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated)
  if ((w0 & 0xff00) === 0xff00) return true; // multicast
  return false;
}

/** True when `ip` (IPv4 or IPv6 text) must never be a webhook target. Unparseable = refused. */
export function isForbiddenAddress(ip: string): boolean {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const family = isIP(bare.split('%')[0] ?? '');
  if (family === 4) return v4Blocked(v4ToInt(bare));
  if (family === 6) {
    const b = v6Bytes(bare);
    return b === null || v6Blocked(b);
  }
  return true;
}

export class ForbiddenTargetError extends Error {
  readonly code = 'EFORBIDDENTARGET';
  constructor(host: string, address: string) {
    super(`${host} resolves to ${address}, a private, loopback, link-local or reserved address`);
    this.name = 'ForbiddenTargetError';
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A drop-in for dns.lookup (the `lookup` option of net.connect/tls.connect) that fails when any
 * resolved address is forbidden. Refusing the whole answer rather than filtering it keeps a name
 * with one public and one private record from being steered to the private one.
 */
export type Resolver = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** guardedLookup over another resolver (tests). */
export function createGuardedLookup(resolve: Resolver) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, { ...options, all: true }, (err, list) => {
      if (err) return callback(err, []);
      const bad = list.find((a) => isForbiddenAddress(a.address));
      if (bad) return callback(new ForbiddenTargetError(hostname, bad.address) as NodeJS.ErrnoException, []);
      if (list.length === 0)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      if (options.all) return callback(null, list);
      const first = list[0] as LookupAddress;
      return callback(null, first.address, first.family);
    });
  };
}

export const guardedLookup = createGuardedLookup((hostname, options, callback) =>
  dnsLookup(hostname, options, (err, addresses) => callback(err, (addresses ?? []) as LookupAddress[])),
);

export interface UrlCheck {
  ok: boolean;
  message?: string;
}

const MAX_URL_LENGTH = 2048;

/** Syntax rules for every webhook URL, whatever the address policy. */
export function checkUrlSyntax(raw: string): UrlCheck & { url?: URL } {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, message: `url must be at most ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: 'url must be an absolute http:// or https:// URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return { ok: false, message: 'url must use http:// or https://' };
  }
  if (url.username || url.password) return { ok: false, message: 'url must not contain credentials' };
  if (!url.hostname) return { ok: false, message: 'url must name a host' };
  return { ok: true, url };
}

/** Resolves the URL's host (literal or by DNS) and refuses forbidden targets. */
export async function checkTargetAddress(url: URL): Promise<UrlCheck> {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(host)) {
    return isForbiddenAddress(host)
      ? { ok: false, message: `url points to ${host}, a private, loopback, link-local or reserved address` }
      : { ok: true };
  }
  return new Promise((resolve) => {
    guardedLookup(host, { all: true }, (err) => {
      if (!err) return resolve({ ok: true });
      if (err instanceof ForbiddenTargetError) return resolve({ ok: false, message: `url host ${err.message}` });
      resolve({ ok: false, message: `url host ${host} could not be resolved` });
    });
  });
}
