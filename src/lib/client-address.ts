/**
 * The key a client address is budgeted under (brute-force and per-address rate limits). One IPv6
 * host usually holds a whole /64 (SLAAC, privacy addresses, a VPS's routed prefix): keyed by the
 * exact address, each of its 2^64 addresses had a fresh budget, so 30 guesses from 30 addresses
 * of one /64 were all checked. So:
 * - IPv4: the address (`203.0.113.7`);
 * - IPv4-mapped IPv6 (`::ffff:203.0.113.7`, what a dual-stack socket reports for an IPv4 client):
 *   the IPv4 address, so one client has one budget whichever way the socket reports it;
 * - other IPv6: its /64 prefix (`2001:db8:1:2::/64`), written the same for every spelling;
 * - anything else (no address, a Unix socket): as given.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** The 8 groups of an IPv6 address (zone id dropped), or null when it is not one. */
function ipv6Groups(address: string): number[] | null {
  const ip = address.replace(/%.*$/, '');
  if (!isIPv6(ip)) return null;
  let text = ip.toLowerCase();
  // A trailing dotted IPv4 (`::ffff:1.2.3.4`) is the last two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? 0 : 8 - left.length - right.length;
  const groups = [...left, ...Array<string>(zeros).fill('0'), ...right].map((g) => Number.parseInt(g, 16));
  return groups.length === 8 ? groups : null;
}

export function addressBudgetKey(address: string): string {
  if (isIPv4(address)) return address;
  const g = ipv6Groups(address);
  if (!g) return address;
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  if (mapped) {
    const [hi = 0, lo = 0] = g.slice(6);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(':')}::/64`;
}
