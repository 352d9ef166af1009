import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { MxResolver, type ResolveResult } from '../../src/modules/delivery/mx-resolver.ts';

let dns: DnsServer;

beforeAll(async () => {
  dns = await startDnsServer({
    'multi.test': {
      MX: [
        { preference: 20, exchange: 'backup.multi.test' },
        { preference: 10, exchange: 'mx-a.multi.test' },
        { preference: 10, exchange: 'mx-b.multi.test' },
        { preference: 30, exchange: 'gone.multi.test' },
      ],
    },
    'mx-a.multi.test': { A: ['127.0.0.11'] },
    'mx-b.multi.test': { A: ['127.0.0.12'], AAAA: ['::1'] },
    'backup.multi.test': { A: { ttl: 120, records: ['127.0.0.13'] } },
    'noemx.test': { A: { ttl: 45, records: ['127.0.0.20'] } },
    'nothing.test': { TXT: ['v=spf1 -all'] },
    'nullmx.test': { MX: [{ preference: 0, exchange: '.' }], A: ['127.0.0.30'] },
    'deadmx.test': { MX: [{ preference: 10, exchange: 'missing.deadmx.test' }] },
    'ttl.test': { MX: [{ preference: 10, exchange: 'mx.ttl.test' }] },
    'mx.ttl.test': { A: { ttl: 60, records: ['127.0.0.40'] } },
    'flaky.test': { MX: [{ preference: 10, exchange: 'mx-a.multi.test' }] },
  });
});

afterAll(() => dns.close());

const resolver = (opts: ConstructorParameters<typeof MxResolver>[0] = {}) =>
  new MxResolver({ servers: [dns.address], timeoutMs: 1000, tries: 1, ...opts });

function hostsOf(r: ResolveResult) {
  if (!r.ok) throw new Error(`expected ok, got ${r.reason}`);
  return r.hosts;
}

const count = (name: string, type: string) => dns.queries.filter((q) => q.name === name && q.type === type).length;

describe('MxResolver', () => {
  it('returns MX hosts in preference order with their addresses, skipping names that do not resolve', async () => {
    const hosts = hostsOf(await resolver().resolve('Multi.Test.'));
    expect(hosts.map((h) => h.priority)).toEqual([10, 10, 20]);
    expect(
      hosts
        .slice(0, 2)
        .map((h) => h.exchange)
        .sort(),
    ).toEqual(['mx-a.multi.test', 'mx-b.multi.test']);
    expect(hosts[2]).toEqual({ exchange: 'backup.multi.test', priority: 20, addresses: ['127.0.0.13'] });
    expect(hosts.find((h) => h.exchange === 'mx-b.multi.test')?.addresses).toEqual(['127.0.0.12', '::1']);
  });

  it('shuffles hosts of equal preference, also on cache hits', async () => {
    const r = resolver();
    const first = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const hosts = hostsOf(await r.resolve('multi.test'));
      first.add(hosts[0]?.exchange ?? '');
      expect(hosts[2]?.exchange).toBe('backup.multi.test');
    }
    // 40 fair coin flips all landing the same way: 2^-39.
    expect(first).toEqual(new Set(['mx-a.multi.test', 'mx-b.multi.test']));
  });

  it('falls back to the A record when there is no MX (implicit MX)', async () => {
    expect(hostsOf(await resolver().resolve('noemx.test'))).toEqual([
      { exchange: 'noemx.test', priority: 0, addresses: ['127.0.0.20'] },
    ]);
  });

  it('fails permanently on a null MX, NXDOMAIN, no MX/A/AAAA, or MX hosts that do not exist', async () => {
    const r = resolver();
    for (const [domain, reason] of [
      ['nullmx.test', /null MX/],
      ['does-not-exist.test', /NXDOMAIN/],
      ['nothing.test', /no MX and no A\/AAAA/],
      ['deadmx.test', /no MX host/],
    ] as const) {
      const result = await r.resolve(domain);
      expect(result, domain).toMatchObject({ ok: false, permanent: true });
      if (!result.ok) expect(result.reason).toMatch(reason);
    }
  });

  it('fails transiently on SERVFAIL and on an unreachable server, and does not cache it', async () => {
    dns.servfail('flaky.test');
    const r = resolver();
    expect(await r.resolve('flaky.test')).toMatchObject({ ok: false, permanent: false });
    dns.servfail('flaky.test', false);
    expect(hostsOf(await r.resolve('flaky.test'))[0]?.addresses).toEqual(['127.0.0.11']);

    // Nothing listens on port 9 of 127.0.0.2: a timeout / refusal, never a permanent failure.
    const dead = new MxResolver({ servers: ['127.0.0.2:9'], timeoutMs: 200, tries: 1 });
    expect(await dead.resolve('multi.test')).toMatchObject({ ok: false, permanent: false });
  });

  it('caches by the smallest address TTL and refreshes after it', async () => {
    let now = 1_000_000;
    const r = resolver({ now: () => now });
    expect(hostsOf(await r.resolve('ttl.test'))[0]?.addresses).toEqual(['127.0.0.40']);
    const mxQueries = count('ttl.test', 'MX');
    dns.set('mx.ttl.test', 'A', ['127.0.0.41'], 60);

    now += 59_000;
    expect(hostsOf(await r.resolve('ttl.test'))[0]?.addresses).toEqual(['127.0.0.40']);
    expect(count('ttl.test', 'MX')).toBe(mxQueries);

    now += 2_000;
    expect(hostsOf(await r.resolve('ttl.test'))[0]?.addresses).toEqual(['127.0.0.41']);
    expect(count('ttl.test', 'MX')).toBe(mxQueries + 1);
  });

  it('caps the cache lifetime, caches negative answers briefly, and bounds the entries', async () => {
    let now = 0;
    const r = resolver({ now: () => now, maxCacheTtlSeconds: 10, negativeTtlSeconds: 5, cacheMaxEntries: 2 });
    await r.resolve('backup.multi.test'); // implicit MX, A TTL 120 s but capped at 10 s
    const before = count('backup.multi.test', 'MX');
    now += 9_000;
    await r.resolve('backup.multi.test');
    expect(count('backup.multi.test', 'MX')).toBe(before);
    now += 2_000;
    await r.resolve('backup.multi.test');
    expect(count('backup.multi.test', 'MX')).toBe(before + 1);

    const nx = count('nx-cache.test', 'MX');
    await r.resolve('nx-cache.test');
    await r.resolve('nx-cache.test');
    expect(count('nx-cache.test', 'MX')).toBe(nx + 1);
    now += 6_000;
    await r.resolve('nx-cache.test');
    expect(count('nx-cache.test', 'MX')).toBe(nx + 2);

    // Third domain evicts the least recently used one (backup.multi.test).
    await r.resolve('noemx.test');
    const evicted = count('backup.multi.test', 'MX');
    await r.resolve('backup.multi.test');
    expect(count('backup.multi.test', 'MX')).toBe(evicted + 1);
  });

  it('shares one lookup between concurrent callers', async () => {
    const r = resolver();
    const before = count('noemx.test', 'MX');
    const results = await Promise.all([r.resolve('noemx.test'), r.resolve('noemx.test'), r.resolve('noemx.test')]);
    expect(results.every((x) => x.ok)).toBe(true);
    expect(count('noemx.test', 'MX')).toBe(before + 1);
  });
});
