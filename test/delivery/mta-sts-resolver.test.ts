import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type MtaStsServer, policyText, startMtaStsServer } from '../peers/mta-sts-server.ts';
import { TEST_CA_CERT } from '../peers/sink-mx.ts';
import { MtaStsResolver, type MtaStsOptions } from '../../src/modules/delivery/smtp/mta-sts.ts';
import { mxMatches, parsePolicy, parseStsTxt } from '../../src/modules/delivery/smtp/mta-sts-policy.ts';

let dns: DnsServer;
let web: MtaStsServer;
const trust = tls.createSecureContext({ ca: [...tls.rootCertificates, TEST_CA_CERT] });

beforeAll(async () => {
  dns = await startDnsServer({});
  web = await startMtaStsServer();
});
afterAll(async () => {
  await dns?.close();
  await web?.close();
});

/** Publishes a policy for `domain` (TXT id + the HTTPS answer) with its host on 127.0.0.1. */
function publish(domain: string, id: string, body: string, extra: Partial<Parameters<MtaStsServer['set']>[1]> = {}) {
  dns.set(`_mta-sts.${domain}`, 'TXT', [`v=STSv1; id=${id};`]);
  dns.set(`mta-sts.${domain}`, 'A', ['127.0.0.1']);
  web.set(`mta-sts.${domain}`, { body, ...extra });
}

const resolvers: MtaStsResolver[] = [];
afterAll(async () => {
  for (const r of resolvers) await r.close();
});
function resolver(o: Partial<MtaStsOptions> = {}) {
  const r = new MtaStsResolver({
    servers: [dns.address],
    port: web.port,
    allowPrivate: true,
    secureContext: trust,
    ...o,
  });
  resolvers.push(r);
  return r;
}
const fetchesOf = (host: string) => web.requests.filter((r) => r.host === host).length;

describe('MTA-STS policy parsing (RFC 8461)', () => {
  it('reads the TXT id, the policy fields and the mx patterns', () => {
    expect(parseStsTxt([['v=STSv1; id=20240101T00;']])).toBe('20240101T00');
    expect(parseStsTxt([['v=STSv1; ', 'id=abc123']])).toBe('abc123');
    expect(parseStsTxt([['v=spf1 -all'], ['v=STSv1; id=x1']])).toBe('x1');
    expect(parseStsTxt([['v=STSv1; id=a'], ['v=STSv1; id=b']])).toBeNull();
    expect(parseStsTxt([['v=STSv1; id=not-alnum']])).toBeNull();
    expect(parseStsTxt([['v=STSv1;']])).toBeNull();
    const p = parsePolicy(
      'version: STSv1\nmode: enforce\nmx: MX1.Example.com\nmx: *.example.net\nmax_age: 99999999\n',
      'i',
    );
    expect(p).toEqual({
      ok: true,
      policy: { mode: 'enforce', mx: ['mx1.example.com', '*.example.net'], maxAge: 31_557_600, id: 'i' },
    });
    expect(parsePolicy('version: STSv1\nmode: enforce\nmax_age: 60\n', 'i').ok).toBe(false);
    expect(parsePolicy('version: STSv1\nmode: strict\nmx: a.b\nmax_age: 60\n', 'i').ok).toBe(false);
    expect(parsePolicy('mode: enforce\nmx: a.b\nmax_age: 60\n', 'i').ok).toBe(false);
    expect(parsePolicy('version: STSv1\nmode: none\nmax_age: 60\n', 'i').ok).toBe(true);
    expect(mxMatches('mx1.example.com.', ['mx1.example.com'])).toBe(true);
    expect(mxMatches('a.example.net', ['*.example.net'])).toBe(true);
    expect(mxMatches('a.b.example.net', ['*.example.net'])).toBe(false);
    expect(mxMatches('example.net', ['*.example.net'])).toBe(false);
    expect(mxMatches('mx.evil.test', ['mx1.example.com', '*.example.net'])).toBe(false);
  });
});

describe('MTA-STS policy fetch and cache', () => {
  it('fetches a policy over verified HTTPS once and serves it from the cache until max_age', async () => {
    let now = 1_000_000;
    const r = resolver({ now: () => now });
    publish('a.sts.test', 'one', policyText('enforce', ['mx.a.sts.test'], 3600));
    const first = await r.policyFor('a.sts.test');
    expect(first.policy).toEqual({ mode: 'enforce', mx: ['mx.a.sts.test'], maxAge: 3600, id: 'one' });
    expect(await r.policyFor('a.sts.test')).toEqual(first);
    expect(fetchesOf('mta-sts.a.sts.test')).toBe(1);

    // After the TXT re-check interval the id is looked at again; unchanged means no new fetch.
    now += 6 * 60_000;
    expect((await r.policyFor('a.sts.test')).policy?.id).toBe('one');
    expect(fetchesOf('mta-sts.a.sts.test')).toBe(1);

    // A new id fetches the new policy.
    publish('a.sts.test', 'two', policyText('testing', ['mx.a.sts.test'], 3600));
    now += 6 * 60_000;
    expect((await r.policyFor('a.sts.test')).policy).toMatchObject({ mode: 'testing', id: 'two' });
    expect(fetchesOf('mta-sts.a.sts.test')).toBe(2);
  });

  it('keeps a cached policy when the record disappears or the new policy cannot be fetched', async () => {
    let now = 5_000_000;
    const r = resolver({ now: () => now });
    publish('b.sts.test', 'v1', policyText('enforce', ['mx.b.sts.test'], 86_400));
    expect((await r.policyFor('b.sts.test')).policy?.mode).toBe('enforce');

    // An attacker who strips the TXT record cannot downgrade the domain before max_age.
    dns.remove('_mta-sts.b.sts.test');
    now += 10 * 60_000;
    const stripped = await r.policyFor('b.sts.test');
    expect(stripped.policy).toMatchObject({ mode: 'enforce', id: 'v1' });
    expect(stripped.note).toMatch(/cached/);

    // Nor can one who makes the policy host fail.
    publish('b.sts.test', 'v2', 'oops', { status: 500 });
    now += 10 * 60_000;
    const failed = await r.policyFor('b.sts.test');
    expect(failed.policy).toMatchObject({ mode: 'enforce', id: 'v1' });
    expect(failed.note).toMatch(/HTTP 500/);

    // Once max_age has run out, the stale policy is gone.
    now += 86_400_000;
    expect((await r.policyFor('b.sts.test')).policy).toBeNull();
  });

  it('refuses a policy host on a private address outside dev mode (nothing is fetched)', async () => {
    const r = resolver({ allowPrivate: false });
    publish('c.sts.test', 'p1', policyText('enforce', ['mx.c.sts.test']));
    const before = fetchesOf('mta-sts.c.sts.test');
    const res = await r.policyFor('c.sts.test');
    expect(res.policy).toBeNull();
    expect(res.note).toMatch(/mta-sts.c.sts.test is not an allowed target/);
    expect(res.note).not.toMatch(/127\.0\.0\.1|::1/);
    expect(fetchesOf('mta-sts.c.sts.test')).toBe(before);
  });

  it('refuses oversized, redirected, mistyped and untrusted policies', async () => {
    const r = resolver();
    publish('d.sts.test', 'big', `${policyText('enforce', ['mx.d.sts.test'])}${'#'.repeat(70 * 1024)}`);
    expect((await r.policyFor('d.sts.test')).note).toMatch(/larger than 65536 bytes/);

    const r2 = resolver();
    publish('d.sts.test', 'moved', '', { status: 301, headers: { location: '/elsewhere' } });
    const moved = await r2.policyFor('d.sts.test');
    expect(moved.policy).toBeNull();
    expect(moved.note).toMatch(/HTTP 301/);
    expect(web.requests.filter((q) => q.path === '/elsewhere')).toEqual([]);

    const r3 = resolver();
    publish('d.sts.test', 'html', policyText('enforce', ['mx.d.sts.test']), { contentType: 'text/html' });
    expect((await r3.policyFor('d.sts.test')).note).toMatch(/not text\/plain/);

    // Without the test CA the policy host's certificate does not verify: no policy.
    const r4 = new MtaStsResolver({ servers: [dns.address], port: web.port, allowPrivate: true });
    resolvers.push(r4);
    publish('d.sts.test', 'ok1', policyText('enforce', ['mx.d.sts.test']));
    const untrusted = await r4.policyFor('d.sts.test');
    expect(untrusted.policy).toBeNull();
    expect(untrusted.note).toMatch(/could not be fetched/);
  });

  it('a domain without a policy record has no policy', async () => {
    const res = await resolver().policyFor('nothing.sts.test');
    expect(res).toEqual({ policy: null, note: 'MTA-STS: no policy record for nothing.sts.test' });
  });
});
