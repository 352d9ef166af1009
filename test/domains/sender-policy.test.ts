import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { addDomain, BOUNCE_HOST, publish, verifyDomain } from './helpers.ts';

/** Outside development mode: mail from a domain the tenant has not verified is refused at accept time. */
let dns: DnsServer;
let ctx: TestContext;
let t: TestTenant;
let other: TestTenant;

beforeAll(async () => {
  dns = await startDnsServer();
  ctx = await createTestContext({
    env: { POSTYARD_DEV_MODE: 'false', POSTYARD_DNS_SERVERS: dns.address, POSTYARD_BOUNCE_HOST: BOUNCE_HOST },
  });
  t = await createTenant(ctx, 'Shop <noreply@shop.example.test>');
  other = await createTenant(ctx, 'Other <noreply@other.example.test>');
});
afterAll(async () => {
  await ctx?.close();
  await dns?.close();
});

function send(key: string, from?: string) {
  return call(ctx.app, 'POST', '/v1/transmissions', {
    key,
    body: {
      recipients: [{ email: 'ann@example.net' }],
      content: { subject: 'Hi', text: 'Hello', ...(from ? { from } : {}) },
    },
  });
}

function expectRefused(res: Awaited<ReturnType<typeof send>>, domain: string) {
  expect(res.statusCode, res.body).toBe(422);
  const err = res.json().errors[0];
  expect(err).toMatchObject({ code: 'sender_domain_not_verified', field: 'content.from' });
  expect(err.message).toContain(domain);
}

describe('sender policy (POSTYARD_DEV_MODE=false)', () => {
  it('refuses an unverified From domain with 422 and accepts it (202) once verified', async () => {
    expect(ctx.c.config.devMode).toBe(false);
    // Not a domain of the tenant at all.
    expectRefused(await send(t.apiKey, 'Shop <hello@shop.example.test>'), 'shop.example.test');
    // The tenant default sender goes through the same check.
    expectRefused(await send(t.apiKey), 'shop.example.test');

    // Added but not yet verified: still refused; nothing was stored.
    const d = await addDomain(ctx, t.apiKey, 'shop.example.test');
    expectRefused(await send(t.apiKey, 'hello@shop.example.test'), 'shop.example.test');
    const count = await ctx.c.database.db
      .selectFrom('transmissions')
      .select('id')
      .where('tenant_id', '=', t.tenantId)
      .execute();
    expect(count).toHaveLength(0);
    expect(await ctx.c.domains.signingKeyFor(t.tenantId, 'shop.example.test')).toBeNull();

    // A failed verification does not help either.
    const failed = await verifyDomain(ctx, t.apiKey, d.id);
    expect(failed.status).toBe('failed');
    expectRefused(await send(t.apiKey, 'hello@shop.example.test'), 'shop.example.test');

    // Published and verified: accepted at once on this node (no wait for the cache).
    publish(dns, d);
    expect((await verifyDomain(ctx, t.apiKey, d.id)).status).toBe('verified');
    const ok = await send(t.apiKey, 'Shop <hello@shop.example.test>');
    expect(ok.statusCode, ok.body).toBe(202);
    expect(ok.json().total_accepted_recipients).toBe(1);
    expect((await send(t.apiKey)).statusCode).toBe(202);
    expect((await ctx.c.domains.signingKeyFor(t.tenantId, 'shop.example.test'))?.keySelector).toBe(d.dkim_selector);
  });

  it('covers subdomains of a verified domain, but not look-alikes or parents', async () => {
    expect((await send(t.apiKey, 'news@eu.mail.SHOP.example.test')).statusCode).toBe(202);
    expect((await ctx.c.domains.signingKeyFor(t.tenantId, 'eu.mail.shop.example.test'))?.domainName).toBe(
      'shop.example.test',
    );
    expectRefused(await send(t.apiKey, 'x@badshop.example.test'), 'badshop.example.test');
    expectRefused(await send(t.apiKey, 'x@example.test'), 'example.test');
  });

  it("another tenant's verified domain does not let a tenant send from it", async () => {
    expectRefused(await send(other.apiKey, 'hello@shop.example.test'), 'shop.example.test');
    expect(await ctx.c.domains.signingKeyFor(other.tenantId, 'shop.example.test')).toBeNull();
  });

  it('deleting the domain refuses its mail again at once', async () => {
    const d = await addDomain(ctx, other.apiKey, 'other.example.test');
    publish(dns, d);
    expect((await verifyDomain(ctx, other.apiKey, d.id)).status).toBe('verified');
    expect((await send(other.apiKey)).statusCode).toBe(202);
    expect((await call(ctx.app, 'DELETE', `/v1/sending-domains/${d.id}`, { key: other.apiKey })).statusCode).toBe(204);
    expectRefused(await send(other.apiKey), 'other.example.test');
  });

  it('another node sees a verification within 5 s (cached lookups are short-lived)', async () => {
    const node2 = await createTestContext({ shareWith: ctx });
    try {
      const tenant = await createTenant(ctx, 'N <n@node.example.test>');
      const sendVia = (c: TestContext) =>
        call(c.app, 'POST', '/v1/transmissions', {
          key: tenant.apiKey,
          body: { recipients: [{ email: 'a@example.net' }], content: { subject: 'Hi', text: 'x' } },
        });
      expect((await sendVia(node2)).statusCode).toBe(422); // node 2 caches "nothing verified"
      const d = await addDomain(ctx, tenant.apiKey, 'node.example.test');
      publish(dns, d);
      await verifyDomain(ctx, tenant.apiKey, d.id);
      const start = Date.now();
      let status = 422;
      while (Date.now() - start < 6000) {
        status = (await sendVia(node2)).statusCode;
        if (status === 202) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(status).toBe(202);
      expect(Date.now() - start).toBeLessThan(5000);
    } finally {
      await node2.close();
    }
  }, 15_000);
});
