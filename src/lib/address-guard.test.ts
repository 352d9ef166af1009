/**
 * The address guard (webhook targets, MX hosts, MTA-STS policy hosts): every special-purpose
 * range of the IANA IPv4 and IPv6 special-purpose registries (RFC 6890 and successors) refused,
 * one row per range with an address inside it and its neighbours just outside. IPv6 neighbours
 * are given only where they are global unicast (2000::/3): the guard refuses all other IPv6 space.
 */
import { describe, expect, it } from 'vitest';
import { isForbiddenAddress } from './address-guard.ts';

interface Row {
  range: string;
  inside: string[];
  /** Just outside the range and public: must be allowed. */
  outside: string[];
}

const V4: Row[] = [
  { range: '0.0.0.0/8', inside: ['0.0.0.0', '0.255.255.255'], outside: ['1.0.0.0'] },
  { range: '10.0.0.0/8', inside: ['10.0.0.0', '10.255.255.255'], outside: ['9.255.255.255', '11.0.0.0'] },
  { range: '100.64.0.0/10', inside: ['100.64.0.0', '100.127.255.255'], outside: ['100.63.255.255', '100.128.0.0'] },
  { range: '127.0.0.0/8', inside: ['127.0.0.1', '127.255.255.255'], outside: ['126.255.255.255', '128.0.0.0'] },
  { range: '169.254.0.0/16', inside: ['169.254.169.254', '169.254.0.0'], outside: ['169.253.255.255', '169.255.0.0'] },
  { range: '172.16.0.0/12', inside: ['172.16.0.0', '172.31.255.255'], outside: ['172.15.255.255', '172.32.0.0'] },
  { range: '192.0.0.0/24', inside: ['192.0.0.0', '192.0.0.255'], outside: ['191.255.255.255', '192.0.1.0'] },
  { range: '192.0.2.0/24', inside: ['192.0.2.0', '192.0.2.255'], outside: ['192.0.1.255', '192.0.3.0'] },
  { range: '192.88.99.0/24', inside: ['192.88.99.1'], outside: ['192.88.98.255', '192.88.100.0'] },
  { range: '192.168.0.0/16', inside: ['192.168.0.0', '192.168.255.255'], outside: ['192.167.255.255', '192.169.0.0'] },
  { range: '198.18.0.0/15', inside: ['198.18.0.0', '198.19.255.255'], outside: ['198.17.255.255', '198.20.0.0'] },
  { range: '198.51.100.0/24', inside: ['198.51.100.7'], outside: ['198.51.99.255', '198.51.101.0'] },
  { range: '203.0.113.0/24', inside: ['203.0.113.7'], outside: ['203.0.112.255', '203.0.114.0'] },
  { range: '224.0.0.0/4', inside: ['224.0.0.1', '239.255.255.250'], outside: ['223.255.255.255'] },
  { range: '240.0.0.0/4', inside: ['240.0.0.1', '255.255.255.254'], outside: [] },
  { range: '255.255.255.255/32', inside: ['255.255.255.255'], outside: [] },
];

const V6: Row[] = [
  { range: '::/128', inside: ['::', '0:0:0:0:0:0:0:0'], outside: [] },
  { range: '::1/128', inside: ['::1', '0:0:0:0:0:0:0:1', '[::1]'], outside: [] },
  { range: '::/96 (IPv4-compatible, deprecated)', inside: ['::127.0.0.1', '::8.8.8.8'], outside: [] },
  {
    range: '::ffff:0:0/96 (IPv4-mapped: the embedded IPv4 decides)',
    inside: ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:169.254.169.254', '::ffff:10.0.0.1', '::ffff:0.0.0.0'],
    outside: ['::ffff:8.8.8.8', '::ffff:93.184.216.34'],
  },
  {
    range: '::ffff:0:0:0/96 (IPv4-translated)',
    inside: ['::ffff:0:127.0.0.1', '::ffff:0:7f00:1', '::ffff:0:a9fe:a9fe', '::ffff:0:8.8.8.8', '0:0:0:0:ffff:0:0:0'],
    outside: [],
  },
  {
    range: '64:ff9b::/96 (NAT64 well-known prefix: the embedded IPv4 decides)',
    inside: ['64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::10.1.2.3', '64:ff9b::c0a8:1'],
    outside: ['64:ff9b::808:808', '64:ff9b::8.8.4.4'],
  },
  { range: '64:ff9b:1::/48 (local-use NAT64)', inside: ['64:ff9b:1::808:808', '64:ff9b:1:ffff::1'], outside: [] },
  { range: '100::/64 (discard-only)', inside: ['100::1', '100::ffff:ffff:ffff:ffff'], outside: [] },
  {
    range: '2001::/23 (IETF protocol assignments: Teredo, benchmarking, ORCHID, AMT...)',
    inside: ['2001::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:2::1', '2001:10::1', '2001:1ff:ffff::1'],
    outside: ['2001:200::1', '2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  },
  {
    range: '2001:db8::/32 (documentation)',
    inside: ['2001:db8::1', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff'],
    outside: ['2001:db7:ffff::1', '2001:db9::1'],
  },
  {
    range: '2002::/16 (6to4: the embedded IPv4 decides)',
    inside: ['2002:7f00:1::1', '2002:a9fe:a9fe::1', '2002:c0a8:101::1', '2002::1'],
    outside: ['2002:808:808::1', '2001:ffff::1', '2003::1'],
  },
  { range: '3fff::/20 (documentation, RFC 9637)', inside: ['3fff::1', '3fff:fff:ffff::1'], outside: ['3fff:1000::1'] },
  { range: '5f00::/16 (SRv6 SIDs)', inside: ['5f00::1'], outside: [] },
  { range: 'fc00::/7 (unique local)', inside: ['fc00::1', 'fd12:3456::1', 'fdff:ffff::1'], outside: [] },
  { range: 'fe80::/10 (link-local)', inside: ['fe80::1', 'fe80::1%eth0', 'febf::1', 'FE80::1'], outside: [] },
  { range: 'fec0::/10 (site-local, deprecated)', inside: ['fec0::1'], outside: [] },
  { range: 'ff00::/8 (multicast)', inside: ['ff02::1', 'ff0e::1'], outside: [] },
  {
    range: 'outside 2000::/3 (not allocated for global unicast)',
    inside: ['1::1', '4000::1', 'e000::1', '1fff:ffff::1'],
    outside: ['2000::1', '2606:4700::1111', '2a00:1450:4001::1', '3ffe::1'],
  },
];

const ROWS = [...V4, ...V6];

describe('isForbiddenAddress: every special-purpose range', () => {
  it.each(ROWS.map((r) => [r.range, r] as const))('refuses inside %s, allows its public neighbours', (_, row) => {
    for (const ip of row.inside) expect(isForbiddenAddress(ip), `${ip} in ${row.range}`).toBe(true);
    for (const ip of row.outside) expect(isForbiddenAddress(ip), `${ip} next to ${row.range}`).toBe(false);
  });

  it('refuses what is not an IP address at all', () => {
    for (const s of ['', 'not-an-ip', 'localhost', '1.2.3', '::ffff:999.0.0.1', '[::1', 'fe80::1%']) {
      expect(isForbiddenAddress(s), JSON.stringify(s)).toBe(true);
    }
  });

  it('allows ordinary public addresses', () => {
    for (const ip of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:2800:220:1::1', '[2606:4700::1111]']) {
      expect(isForbiddenAddress(ip), ip).toBe(false);
    }
  });
});
