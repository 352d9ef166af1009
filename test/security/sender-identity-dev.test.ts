/**
 * Issue 31, item 9: development mode lifts the domain verification only. Over SMTP a From with a
 * second mailbox on another domain, or a Sender (or Resent-From / Resent-Sender) on another
 * tenant's domain, was delivered as is, because the whole sender policy was skipped. Now the
 * From's own domain is accepted unverified and every other identity must be on it or on a
 * verified domain of the tenant (550 5.7.1 otherwise), as outside development mode.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDomain, BOUNCE_HOST, publish, verifyDomain } from '../domains/helpers.ts';
import { call, createTenant, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { message, queuedId, RawClient, type SmtpSetup, sendRaw, setupSmtp } from '../smtp/helpers.ts';

let dns: DnsServer;
let s: SmtpSetup;
let other: TestTenant;

beforeAll(async () => {
  dns = await startDnsServer();
  s = await setupSmtp({
    POSTYARD_DEV_MODE: 'true',
    POSTYARD_DNS_SERVERS: dns.address,
    POSTYARD_BOUNCE_HOST: BOUNCE_HOST,
  });
  other = await createTenant(s.ctx, 'Other <noreply@other-tenant.test>');
  for (const [key, domain] of [
    [s.tenant.apiKey, 'my-verified.test'],
    [other.apiKey, 'other-tenant.test'],
  ] as const) {
    const d = await addDomain(s.ctx, key, domain);
    publish(dns, d);
    expect((await verifyDomain(s.ctx, key, d.id)).status).toBe('verified');
  }
});
afterAll(async () => {
  await s?.close();
  await dns?.close();
});

async function submit(from: string, extra: string[] = []) {
  const c = await RawClient.ready(s.smtp.port, s.cred);
  try {
    return await sendRaw(c, ['ann@example.net'], message({ from, headers: extra }));
  } finally {
    c.destroy();
  }
}

describe('development mode: only the domain verification is lifted', () => {
  it('runs in development mode', () => {
    expect(s.ctx.c.config.devMode).toBe(true);
  });

  it('refuses a From whose second mailbox is on another domain with 550 5.7.1', async () => {
    expect(await submit('Me <me@unverified.test>, Boss <ceo@other-tenant.test>')).toMatch(
      /^550 5\.7\.1 .*other-tenant\.test/,
    );
    expect(await submit('me@unverified.test, ceo@bank.test')).toMatch(/^550 5\.7\.1 .*bank\.test/);
  });

  it("refuses a Sender, Resent-From or Resent-Sender on another tenant's domain with 550 5.7.1", async () => {
    for (const header of ['Sender', 'Resent-From', 'Resent-Sender']) {
      expect(await submit('Me <me@unverified.test>', [`${header}: Boss <ceo@other-tenant.test>`]), header).toMatch(
        /^550 5\.7\.1 .*other-tenant\.test/,
      );
    }
  });

  it('still accepts any one From domain unverified, with more identities on it, its subdomains or verified domains', async () => {
    expect(queuedId(await submit('Me <me@unverified.test>'))).toBeTruthy();
    // Another tenant's domain as the one From: development mode does not check ownership.
    expect(queuedId(await submit('ceo@other-tenant.test'))).toBeTruthy();
    expect(
      queuedId(
        await submit('Me <me@unverified.test>, You <you@mail.unverified.test>', [
          'Sender: me@unverified.test',
          'Resent-From: team@my-verified.test',
          'Resent-Sender: ops@mail.unverified.test',
        ]),
      ),
    ).toBeTruthy();
  });

  it('the API (one From mailbox) is unchanged: any From domain is accepted', async () => {
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: s.tenant.apiKey,
      body: {
        recipients: [{ email: 'ann@example.net' }],
        content: { from: 'Me <me@unverified.test>', subject: 'Hi', text: 'Hello' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
  });
});
