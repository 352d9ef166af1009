import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret } from '../../src/lib/crypto.ts';
import {
  call,
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import {
  addDomain,
  BOUNCE_HOST,
  chunks,
  type DomainBody,
  keysMatch,
  publish,
  record,
  verifyDomain,
} from './helpers.ts';

let dns: DnsServer;
let ctx: TestContext;
let t: TestTenant;
let other: TestTenant;
let n = 0;
/** A fresh domain name per test so tests never see each other's DNS records. */
const fresh = (prefix = 'd') => `${prefix}${++n}-${Math.random().toString(36).slice(2, 8)}.example.test`;

beforeAll(async () => {
  dns = await startDnsServer();
  ctx = await createTestContext({
    env: { POSTYARD_DNS_SERVERS: dns.address, POSTYARD_BOUNCE_HOST: BOUNCE_HOST },
  });
  t = await createTenant(ctx);
  other = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
  await dns?.close();
});

describe('POST /v1/sending-domains', () => {
  it('answers 201 with the four records to publish and a 2048-bit DKIM key', async () => {
    const domain = fresh();
    const res = await call(ctx.app, 'POST', '/v1/sending-domains', { key: t.apiKey, body: { domain } });
    expect(res.statusCode, res.body).toBe(201);
    const d = res.json() as DomainBody;
    expect(d).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      domain,
      status: 'pending',
      status_reason: null,
      dkim_selector: expect.stringMatching(/^py\d{6}[a-z0-9]{6}$/),
      return_path_domain: `bounces.${domain}`,
      verified_at: null,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(d.dns_records.map((r) => [r.purpose, r.type, r.name, r.status, r.required])).toEqual([
      ['dkim', 'TXT', `${d.dkim_selector}._domainkey.${domain}`, 'pending', true],
      ['spf', 'TXT', domain, 'pending', false],
      ['return_path', 'CNAME', `bounces.${domain}`, 'pending', false],
      ['dmarc', 'TXT', `_dmarc.${domain}`, 'pending', false],
    ]);
    expect(record(d, 'dkim').value).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/);
    expect(record(d, 'spf').value).toBe(`v=spf1 include:${BOUNCE_HOST} ~all`);
    expect(record(d, 'return_path').value).toBe(BOUNCE_HOST);
    expect(record(d, 'dmarc').value).toMatch(/^v=DMARC1; p=none;/);

    const p = record(d, 'dkim').value.split('p=')[1] ?? '';
    const pub = createPublicKey({ key: Buffer.from(p, 'base64'), format: 'der', type: 'spki' });
    expect(pub.asymmetricKeyType).toBe('rsa');
    expect(pub.asymmetricKeyDetails?.modulusLength).toBe(2048);
  });

  it('stores the private key encrypted with the master key, and it matches the published public key', async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    const row = await ctx.c.database.db
      .selectFrom('sending_domains')
      .selectAll()
      .where('id', '=', d.id)
      .executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(t.tenantId);
    expect(row.dkim_private_key).toMatch(/^v1:/);
    expect(row.dkim_private_key).not.toContain('PRIVATE KEY');
    expect(JSON.stringify(row)).not.toContain('BEGIN');
    const pem = decryptSecret(ctx.c.masterKey, row.dkim_private_key);
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    // The PEM body appears nowhere in the row in clear.
    const body = pem.split('\n').slice(1, 3).join('');
    expect(JSON.stringify(row)).not.toContain(body);
    expect(keysMatch(pem, record(d, 'dkim').value)).toBe(true);
    // A different key does not verify against the published one.
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    });
    expect(keysMatch(stranger.toString(), record(d, 'dkim').value)).toBe(false);
    // And a wrong master key cannot open it (AES-GCM authenticates).
    expect(() => decryptSecret(Buffer.alloc(32, 1), row.dkim_private_key)).toThrow();
  });

  it('lower-cases the domain and drops a trailing dot; IDNs become punycode', async () => {
    const base = fresh();
    const d = await addDomain(ctx, t.apiKey, `Mail.${base.toUpperCase()}.`);
    expect(d.domain).toBe(`mail.${base}`);
    const idn = await addDomain(ctx, t.apiKey, `bücher.${base}`);
    expect(idn.domain).toBe(`xn--bcher-kva.${base}`);
  });

  it('refuses bad domains with 422 validation_failed on the domain field', async () => {
    for (const domain of [
      'not a domain',
      'localhost',
      '-bad.example.com',
      'a..example.com',
      'example.123',
      'x'.repeat(64) + '.com',
      '',
      'user@example.com',
    ]) {
      const res = await call(ctx.app, 'POST', '/v1/sending-domains', { key: t.apiKey, body: { domain } });
      expect(res.statusCode, `${domain}: ${res.body}`).toBe(422);
      const err = res.json().errors[0];
      expect(err).toMatchObject({ code: 'validation_failed', field: 'domain' });
    }
    for (const body of [{}, { domain: 5 }, { domain: 'ok.example.com', extra: 1 }]) {
      const res = await call(ctx.app, 'POST', '/v1/sending-domains', { key: t.apiKey, body });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().errors[0].code).toBe('validation_failed');
    }
  });

  it('a domain added twice by one tenant is 422 on domain; another tenant may add it too', async () => {
    const domain = fresh();
    await addDomain(ctx, t.apiKey, domain);
    const again = await call(ctx.app, 'POST', '/v1/sending-domains', {
      key: t.apiKey,
      body: { domain: domain.toUpperCase() },
    });
    expect(again.statusCode).toBe(422);
    expect(again.json().errors[0]).toMatchObject({ code: 'validation_failed', field: 'domain' });
    expect(again.json().errors[0].message).toContain('already');
    const theirs = await addDomain(ctx, other.apiKey, domain);
    expect(theirs.domain).toBe(domain);
  });

  it('honours Idempotency-Key: a replay returns the same domain, nothing is created twice', async () => {
    const domain = fresh();
    const headers = { 'idempotency-key': `create-${domain}` };
    const first = await call(ctx.app, 'POST', '/v1/sending-domains', { key: t.apiKey, body: { domain }, headers });
    expect(first.statusCode).toBe(201);
    const second = await call(ctx.app, 'POST', '/v1/sending-domains', { key: t.apiKey, body: { domain }, headers });
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json()).toEqual(first.json());
    const rows = await ctx.c.database.db
      .selectFrom('sending_domains')
      .select('id')
      .where('domain', '=', domain)
      .execute();
    expect(rows).toHaveLength(1);
  });
});

describe('list, get, delete', () => {
  it('pages the tenant own domains newest first, gets one, deletes it', async () => {
    const tenant = await createTenant(ctx);
    const a = await addDomain(ctx, tenant.apiKey, fresh('a'));
    const b = await addDomain(ctx, tenant.apiKey, fresh('b'));
    await addDomain(ctx, other.apiKey, fresh('o'));

    const page1 = await call(ctx.app, 'GET', '/v1/sending-domains', { key: tenant.apiKey, query: { limit: '1' } });
    expect(page1.statusCode).toBe(200);
    expect(page1.json().data.map((d: DomainBody) => d.id)).toEqual([b.id]);
    expect(page1.json().data[0]).toEqual(b);
    const cursor = page1.json().next_cursor;
    expect(cursor).toBeTypeOf('string');
    const page2 = await call(ctx.app, 'GET', '/v1/sending-domains', {
      key: tenant.apiKey,
      query: { limit: '1', cursor },
    });
    expect(page2.json().data.map((d: DomainBody) => d.id)).toEqual([a.id]);
    expect(page2.json().next_cursor).toBeNull();
    const bad = await call(ctx.app, 'GET', '/v1/sending-domains', {
      key: tenant.apiKey,
      query: { cursor: `${cursor}x` },
    });
    expect(bad.statusCode).toBe(400);

    const one = await call(ctx.app, 'GET', `/v1/sending-domains/${a.id}`, { key: tenant.apiKey });
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual(a);

    const del = await call(ctx.app, 'DELETE', `/v1/sending-domains/${a.id}`, { key: tenant.apiKey });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect((await call(ctx.app, 'GET', `/v1/sending-domains/${a.id}`, { key: tenant.apiKey })).statusCode).toBe(404);
    expect((await call(ctx.app, 'DELETE', `/v1/sending-domains/${a.id}`, { key: tenant.apiKey })).statusCode).toBe(404);
    const after = await call(ctx.app, 'GET', '/v1/sending-domains', { key: tenant.apiKey });
    expect(after.json().data.map((d: DomainBody) => d.id)).toEqual([b.id]);
    // The key material went with the row.
    const rows = await ctx.c.database.db.selectFrom('sending_domains').select('id').where('id', '=', a.id).execute();
    expect(rows).toHaveLength(0);
  });

  it("another tenant's id is 404 on get, verify and delete, and stays intact", async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    for (const [method, url] of [
      ['GET', `/v1/sending-domains/${d.id}`],
      ['POST', `/v1/sending-domains/${d.id}/verify`],
      ['DELETE', `/v1/sending-domains/${d.id}`],
    ] as const) {
      const res = await call(ctx.app, method, url, { key: other.apiKey });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().errors[0].code).toBe('not_found');
    }
    expect((await call(ctx.app, 'GET', `/v1/sending-domains/${d.id}`, { key: t.apiKey })).json().status).toBe(
      'pending',
    );
  });

  it('needs manage:sending-domains', async () => {
    const without = await keyWithScopes(ctx, t.tenantId, ['send:transmissions', 'manage:webhooks']);
    const only = await keyWithScopes(ctx, t.tenantId, ['manage:sending-domains']);
    const d = await addDomain(ctx, only, fresh());
    for (const [method, url, body] of [
      ['POST', '/v1/sending-domains', { domain: fresh() }],
      ['GET', '/v1/sending-domains', undefined],
      ['GET', `/v1/sending-domains/${d.id}`, undefined],
      ['POST', `/v1/sending-domains/${d.id}/verify`, undefined],
      ['DELETE', `/v1/sending-domains/${d.id}`, undefined],
    ] as const) {
      const res = await call(ctx.app, method, url, { key: without, ...(body ? { body } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json().errors[0]).toMatchObject({ code: 'insufficient_scope' });
      expect(res.json().errors[0].message).toContain('manage:sending-domains');
    }
    expect((await call(ctx.app, 'GET', '/v1/sending-domains', { key: only })).statusCode).toBe(200);
    expect((await call(ctx.app, 'GET', '/v1/sending-domains')).statusCode).toBe(401);
  });
});

describe('POST /v1/sending-domains/:id/verify (against a DNS server on loopback)', () => {
  it('all records published: every record and the domain are verified', async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    publish(dns, d);
    const before = dns.queries.length;
    const v = await verifyDomain(ctx, t.apiKey, d.id);
    // The lookups really went to the configured server.
    expect(dns.queries.slice(before).map((q) => q.name)).toEqual(
      expect.arrayContaining([record(d, 'dkim').name, d.domain, `bounces.${d.domain}`, `_dmarc.${d.domain}`]),
    );
    expect(v.status).toBe('verified');
    expect(v.status_reason).toBeNull();
    expect(v.verified_at).toEqual(expect.any(String));
    for (const r of v.dns_records) {
      expect(r, r.purpose).toMatchObject({ status: 'verified', error: null, last_checked_at: expect.any(String) });
    }
    // Stored: a GET shows the same.
    const got = await call(ctx.app, 'GET', `/v1/sending-domains/${d.id}`, { key: t.apiKey });
    expect(got.json()).toEqual(v);
    // Verifying again keeps the first verified_at.
    const again = await verifyDomain(ctx, t.apiKey, d.id);
    expect(again.verified_at).toBe(v.verified_at);
  });

  it('missing DKIM: failed with per-record statuses; wrong key: failed; republished: verified', async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    publish(dns, d, ['spf', 'return_path']);
    let v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(v.status).toBe('failed');
    expect(v.status_reason).toContain('No DKIM');
    expect(v.verified_at).toBeNull();
    expect(Object.fromEntries(v.dns_records.map((r) => [r.purpose, r.status]))).toEqual({
      dkim: 'failed',
      spf: 'verified',
      return_path: 'verified',
      dmarc: 'failed',
    });
    expect(record(v, 'dkim').error).toContain(record(d, 'dkim').name);
    expect(record(v, 'dmarc').error).toContain('No DMARC');

    // A DKIM record with another key (e.g. pasted from another domain) is not enough.
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({
      type: 'spki',
      format: 'der',
    });
    dns.set(record(d, 'dkim').name, 'TXT', [chunks(`v=DKIM1; k=rsa; p=${stranger.toString('base64')}`)]);
    v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(v.status).toBe('failed');
    expect(record(v, 'dkim')).toMatchObject({ status: 'failed', error: expect.stringContaining('public key') });

    // Publishing the right record (split differently, with spaces a DNS console may add) fixes it.
    const p = record(d, 'dkim').value.split('p=')[1] ?? '';
    dns.set(record(d, 'dkim').name, 'TXT', [['v=DKIM1; k=rsa; p=', p.slice(0, 200), ` ${p.slice(200)}`]]);
    publish(dns, d, ['dmarc']);
    v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(v.status).toBe('verified');
    expect(v.dns_records.every((r) => r.status === 'verified')).toBe(true);

    // Removing DKIM later un-verifies it on the next check.
    dns.remove(record(d, 'dkim').name);
    v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(v.status).toBe('failed');
    expect(v.verified_at).toBeNull();
  });

  it('DKIM alone verifies the domain; SPF, return path and DMARC are reported but optional', async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    publish(dns, d, ['dkim']);
    const v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(v.status).toBe('verified');
    expect(Object.fromEntries(v.dns_records.map((r) => [r.purpose, r.status]))).toEqual({
      dkim: 'verified',
      spf: 'failed',
      return_path: 'failed',
      dmarc: 'failed',
    });
    // Until the return-path CNAME verifies, mail uses the bounce host as envelope domain.
    expect((await ctx.c.domains.signingKeyFor(t.tenantId, d.domain))?.returnPathDomain).toBe(BOUNCE_HOST);
  });

  it('SPF: two records fail, an SPF without our include fails, a merged one passes', async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    publish(dns, d, ['dkim']);
    dns.set(d.domain, 'TXT', [
      'v=spf1 include:_spf.example.net ~all',
      `v=spf1 include:${BOUNCE_HOST} ~all`,
      'google-site-verification=x',
    ]);
    let v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(record(v, 'spf')).toMatchObject({ status: 'failed', error: expect.stringContaining('2 SPF records') });
    dns.set(d.domain, 'TXT', ['v=spf1 include:_spf.example.net ~all']);
    v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(record(v, 'spf')).toMatchObject({
      status: 'failed',
      error: expect.stringContaining(`include:${BOUNCE_HOST}`),
    });
    dns.set(d.domain, 'TXT', [
      `v=spf1 ip4:192.0.2.0/24 include:_spf.example.net include:${BOUNCE_HOST.toUpperCase()} -all`,
    ]);
    v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(record(v, 'spf').status).toBe('verified');
  });

  it('return path: a CNAME elsewhere fails; DMARC of the parent domain covers a subdomain', async () => {
    const parent = fresh('p');
    const d = await addDomain(ctx, t.apiKey, `mail.${parent}`);
    publish(dns, d, ['dkim']);
    dns.set(`bounces.${d.domain}`, 'CNAME', ['bounces.other-provider.example']);
    dns.set(`_dmarc.${parent}`, 'TXT', ['v=DMARC1; p=reject; rua=mailto:d@example.test']);
    const v = await verifyDomain(ctx, t.apiKey, d.id);
    expect(record(v, 'return_path')).toMatchObject({
      status: 'failed',
      error: expect.stringContaining('bounces.other-provider.example'),
    });
    expect(record(v, 'dmarc').status).toBe('verified');
  });

  it('a DNS failure (SERVFAIL) leaves statuses as they were and says so', async () => {
    const d = await addDomain(ctx, t.apiKey, fresh());
    publish(dns, d);
    expect((await verifyDomain(ctx, t.apiKey, d.id)).status).toBe('verified');
    dns.servfail(record(d, 'dkim').name);
    try {
      const v = await verifyDomain(ctx, t.apiKey, d.id);
      expect(v.status).toBe('verified');
      expect(record(v, 'dkim')).toMatchObject({ status: 'verified', error: expect.stringContaining('temporarily') });
    } finally {
      dns.servfail(record(d, 'dkim').name, false);
    }
  }, 30_000);

  it('one owner per domain: a second tenant cannot verify a domain another tenant holds verified', async () => {
    const domain = fresh();
    const mine = await addDomain(ctx, t.apiKey, domain);
    const theirs = await addDomain(ctx, other.apiKey, domain);
    publish(dns, mine);
    // Their DKIM record too (different selector), so only ownership stands in the way.
    publish(dns, theirs, ['dkim']);
    expect((await verifyDomain(ctx, t.apiKey, mine.id)).status).toBe('verified');
    const v = await verifyDomain(ctx, other.apiKey, theirs.id);
    expect(v.status).toBe('failed');
    expect(record(v, 'dkim').status).toBe('verified');
    expect(v.status_reason).toContain('another account');
    // Once the owner deletes it, the other tenant can verify.
    expect((await call(ctx.app, 'DELETE', `/v1/sending-domains/${mine.id}`, { key: t.apiKey })).statusCode).toBe(204);
    expect((await verifyDomain(ctx, other.apiKey, theirs.id)).status).toBe('verified');
  });

  it('the database itself refuses a second verified owner (partial unique index), so racing verifications cannot both win', async () => {
    const domain = fresh();
    const a = await addDomain(ctx, t.apiKey, domain);
    const b = await addDomain(ctx, other.apiKey, domain);
    const db = ctx.c.database.db;
    await db.updateTable('sending_domains').set({ status: 'verified' }).where('id', '=', a.id).execute();
    await expect(
      db.updateTable('sending_domains').set({ status: 'verified' }).where('id', '=', b.id).execute(),
    ).rejects.toThrow();
    // Pending and failed claims of the same name are fine.
    await db.updateTable('sending_domains').set({ status: 'failed' }).where('id', '=', b.id).execute();
  });
});

describe('DomainsService.signingKeyFor (dev mode: any domain of the tenant)', () => {
  it('returns the decrypted key of the matching domain or its parent, null otherwise', async () => {
    const domain = fresh();
    const d = await addDomain(ctx, t.apiKey, domain);
    const key = await ctx.c.domains.signingKeyFor(t.tenantId, domain);
    expect(key).toMatchObject({ domainName: domain, keySelector: d.dkim_selector, returnPathDomain: BOUNCE_HOST });
    expect(keysMatch(key?.privateKeyPem ?? '', record(d, 'dkim').value)).toBe(true);
    expect((await ctx.c.domains.signingKeyFor(t.tenantId, `news.${domain.toUpperCase()}`))?.domainName).toBe(domain);
    expect(await ctx.c.domains.signingKeyFor(other.tenantId, domain)).toBeNull();
    expect(await ctx.c.domains.signingKeyFor(t.tenantId, `x${domain}`)).toBeNull();

    // Verified with its return-path CNAME: the envelope domain becomes bounces.<domain>.
    publish(dns, d);
    await verifyDomain(ctx, t.apiKey, d.id);
    expect((await ctx.c.domains.signingKeyFor(t.tenantId, domain))?.returnPathDomain).toBe(`bounces.${domain}`);
    // The most specific domain wins over its parent.
    const sub = await addDomain(ctx, t.apiKey, `eu.${domain}`);
    publish(dns, sub);
    await verifyDomain(ctx, t.apiKey, sub.id);
    expect((await ctx.c.domains.signingKeyFor(t.tenantId, `eu.${domain}`))?.keySelector).toBe(sub.dkim_selector);
    // Deleting drops the cached key on this node at once.
    await call(ctx.app, 'DELETE', `/v1/sending-domains/${d.id}`, { key: t.apiKey });
    expect(await ctx.c.domains.signingKeyFor(t.tenantId, domain)).toBeNull();
  });
});
