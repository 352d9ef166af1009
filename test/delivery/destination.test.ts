import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { routeFor } from '../../src/modules/delivery/destination.ts';
import { MxResolver } from '../../src/modules/delivery/mx-resolver.ts';

/**
 * Outside development mode, MX hosts on internal addresses are never connected to: otherwise a
 * tenant could point a domain's MX at 127.0.0.1 or a metadata address and use delivery as an
 * SSRF probe. Only name resolution happens here (against a DNS server on loopback); nothing
 * connects anywhere.
 */
let dns: DnsServer;

beforeAll(async () => {
  dns = await startDnsServer({
    'inside.test': { MX: [{ preference: 10, exchange: 'mx.inside.test' }] },
    'mx.inside.test': { A: ['127.0.0.1', '10.1.2.3', '169.254.169.254'], AAAA: ['::1'] },
    'mixed.test': {
      MX: [
        { preference: 10, exchange: 'mx1.mixed.test' },
        { preference: 20, exchange: 'mx2.mixed.test' },
      ],
    },
    'mx1.mixed.test': { A: ['192.168.0.5'] },
    'mx2.mixed.test': { A: ['8.8.8.8', '172.16.0.1'] },
  });
});
afterAll(() => dns.close());

const options = (allowPrivate: boolean) => ({
  resolver: new MxResolver({ servers: [dns.address], timeoutMs: 1000, tries: 1 }),
  relay: null,
  mxPort: 25,
  allowPrivate,
});

describe('routeFor and internal MX addresses', () => {
  it('bounces (5.4.4, permanent) a domain whose MX hosts resolve only to internal addresses', async () => {
    const r = await routeFor('inside.test', options(false));
    expect(r).toMatchObject({ ok: false, permanent: true, enhancedCode: '5.4.4' });
    if (!r.ok) expect(r.reason).toContain('loopback, private or reserved');
  });

  it('keeps only the public addresses, and drops MX hosts left with none', async () => {
    const r = await routeFor('mixed.test', options(false));
    if (!r.ok) throw new Error(r.reason);
    expect(r.route.hosts).toEqual([{ host: 'mx2.mixed.test', addresses: ['8.8.8.8'], port: 25 }]);
  });

  it('allows internal addresses when told to (development mode, POSTYARD_ALLOW_PRIVATE_MX_TARGETS)', async () => {
    const r = await routeFor('inside.test', options(true));
    if (!r.ok) throw new Error(r.reason);
    expect(r.route.hosts[0]?.addresses).toEqual(['127.0.0.1', '10.1.2.3', '169.254.169.254', '::1']);
  });
});
