import { type LookupAddress, type LookupOptions, lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * Which addresses Postyard may connect to on a customer's or a DNS answer's say-so (webhook
 * targets, MX hosts, MTA-STS policy hosts). Refused: every range of the IANA IPv4 and IPv6
 * special-purpose address registries (RFC 6890 and successors) that is not globally reachable,
 * plus multicast, and all IPv6 outside 2000::/3 (the only space allocated for global unicast).
 * IPv6 forms that carry an IPv4 address (IPv4-mapped, NAT64, 6to4) are judged by that address,
 * so `::ffff:127.0.0.1` or `64:ff9b::a9fe:a9fe` cannot reach loopback or cloud metadata.
 * Ranges are data, matched by node's net.BlockList; address-guard.test.ts (beside it) has a
 * row per range.
 */

const V4_REFUSED: [string, number][] = [
  ['0.0.0.0', 8], // "this network", includes the unspecified address
  ['10.0.0.0', 8], // private (RFC 1918)
  ['100.64.0.0', 10], // shared address space, carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata endpoints
  ['172.16.0.0', 12], // private (RFC 1918)
  ['192.0.0.0', 24], // IETF protocol assignments (DS-Lite, NAT64 discovery...)
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private (RFC 1918)
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, includes limited broadcast 255.255.255.255
];

/** Refused whatever the rest of the address says (several also fall outside 2000::/3: kept as documentation). */
const V6_REFUSED: [string, number][] = [
  ['::', 96], // unspecified, loopback and the deprecated IPv4-compatible form ::a.b.c.d
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT): never a real destination for us
  ['64:ff9b:1::', 48], // local-use NAT64: the embedding is a private deployment's choice
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, ORCHID, AMT, ...
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // SRv6 SIDs
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];

/** IPv6 ranges whose byte `at`..`at+3` hold an IPv4 address: that address decides. */
const V6_EMBEDDING: { prefix: string; bits: number; at: number }[] = [
  { prefix: '::ffff:0:0', bits: 96, at: 12 }, // IPv4-mapped
  { prefix: '64:ff9b::', bits: 96, at: 12 }, // NAT64 well-known prefix (RFC 6052)
  { prefix: '2002::', bits: 16, at: 2 }, // 6to4 (RFC 3056)
];

function blockList(ranges: [string, number][], family: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  for (const [net, bits] of ranges) list.addSubnet(net, bits, family);
  return list;
}

const v4Refused = blockList(V4_REFUSED, 'ipv4');
const v6Refused = blockList(V6_REFUSED, 'ipv6');
const globalUnicast = blockList([['2000::', 3]], 'ipv6');
const embedding = V6_EMBEDDING.map((e) => ({ ...e, list: blockList([[e.prefix, e.bits]], 'ipv6') }));

/**
 * The 16 bytes of an IPv6 address, or null. The WHATWG URL parser validates it and gives the
 * canonical text (hex words, `::` at most once, dotted IPv4 tails converted), which is then
 * simple to expand.
 */
function v6Bytes(ip: string): number[] | null {
  let canonical: string;
  try {
    canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
  const [head = '', tail] = canonical.split('::');
  const words = (s: string) => (s ? s.split(':').map((w) => Number.parseInt(w, 16)) : []);
  const h = words(head);
  const t = tail === undefined ? [] : words(tail);
  const all = [...h, ...new Array(8 - h.length - t.length).fill(0), ...t];
  return all.flatMap((w) => [w >> 8, w & 0xff]);
}

function v6Forbidden(ip: string): boolean {
  for (const e of embedding) {
    if (!e.list.check(ip, 'ipv6')) continue;
    const bytes = v6Bytes(ip);
    return !bytes || v4Refused.check(bytes.slice(e.at, e.at + 4).join('.'), 'ipv4');
  }
  return v6Refused.check(ip, 'ipv6') || !globalUnicast.check(ip, 'ipv6');
}

/** True when `ip` (IPv4 or IPv6 text, brackets and zone id allowed) must not be connected to. Unparseable = refused. */
export function isForbiddenAddress(ip: string): boolean {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const noZone = bare.split('%')[0] ?? '';
  const family = isIP(bare) ? isIP(noZone) : 0;
  if (family === 4) return v4Refused.check(noZone, 'ipv4');
  if (family === 6) return v6Forbidden(noZone);
  return true;
}

/**
 * A name refused because of what it resolves to. The message names the host only, never the
 * address: it reaches tenants (the 422 of a webhook URL, a webhook delivery's error, MTA-STS
 * notes), and the address an internal name resolves to is the operator's.
 */
export class ForbiddenTargetError extends Error {
  readonly code = 'EFORBIDDENTARGET';
  constructor(host: string) {
    super(`${host} is not an allowed target`);
    this.name = 'ForbiddenTargetError';
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export type Resolver = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * A drop-in for dns.lookup (the `lookup` option of net.connect/tls.connect/undici) that fails
 * when any resolved address is forbidden. Checking the address actually connected to defeats
 * DNS rebinding between a create-time check and the connection; refusing the whole answer
 * rather than filtering it keeps a name with one public and one private record from being
 * steered to the private one. `resolve` is replaceable for tests.
 */
export function createGuardedLookup(resolve: Resolver) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, { ...options, all: true }, (err, list) => {
      if (err) return callback(err, []);
      const bad = list.find((a) => isForbiddenAddress(a.address));
      if (bad) return callback(new ForbiddenTargetError(hostname) as NodeJS.ErrnoException, []);
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
