/**
 * A tracking host name per sending domain (docs/domains.md "Tracking host name"): set with PATCH,
 * listed as a CNAME in the domain's dns_records, verified against a real DNS server on loopback,
 * and once verified used for the links, the open pixel and the https List-Unsubscribe URL of that
 * domain's mail; the public tracking routes answer on that host. Both backends.
 */
import { request } from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker } from '../helpers/delivery.ts';
import { addDomain, type DomainBody, publish, verifyDomain } from '../domains/helpers.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';

const PUBLIC_HOST = 'track.postyard.test';
let ctx: TestContext;
let t: TestTenant;
let other: TestTenant;
let dns: DnsServer;
let sink: SinkMx;
let worker: DeliveryWorker;
let port: number;
let publicBase: string;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}

beforeAll(async () => {
  sink = await startSinkMx({ tls: false });
  dns = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  port = await freePort();
  publicBase = `http://${PUBLIC_HOST}:${port}`;
  ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dns.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'mta.postyard.test',
      POSTYARD_PUBLIC_URL: publicBase,
    },
  });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  t = await createTenant(ctx, 'Acme <news@acme.test>');
  other = await createTenant(ctx, 'Other <news@other.test>');
  worker = startTestWorker(ctx.c, 'tracking-host');
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await sink?.close();
  await dns?.close();
});

const patch = (key: string, id: string, tracking_hostname: string | null) =>
  call(ctx.app, 'PATCH', `/v1/sending-domains/${id}`, { key, body: { tracking_hostname } });

async function send(email: string) {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email }],
      content: {
        from: 'Acme <news@acme.test>',
        subject: 'Sale',
        html: '<html><body><a id="go" href="https://shop.acme.test/sale?x=1">Sale</a></body></html>',
      },
      options: { mail_type: 'marketing' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  const end = Date.now() + 30_000;
  for (;;) {
    const m = sink.messages.find((x) => x.rcptTo.includes(email));
    if (m) {
      const head = (m.raw.toString('latin1').split('\r\n\r\n')[0] ?? '').replace(/\r\n[ \t]+/g, ' ');
      return { head, html: (await simpleParser(m.raw)).html || '' };
    }
    if (Date.now() > end) throw new Error(`nothing delivered to ${email}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A real HTTP request to the listening server, with the Host header a browser would send. */
function getWithHost(host: string, path: string, post?: string): Promise<{ status: number; location?: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: post === undefined ? 'GET' : 'POST',
        headers: {
          host: `${host}:${port}`,
          'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0',
          ...(post === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
        },
      },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, ...(res.headers.location ? { location: res.headers.location } : {}) });
      },
    );
    req.on('error', reject);
    req.end(post);
  });
}

/** The number of events of `type` for the message sent to `recipient`. */
async function eventCount(recipient: string, type: string): Promise<number> {
  const r = await ctx.c.database.db
    .selectFrom('events')
    .innerJoin('messages', 'messages.id', 'events.message_id')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('messages.recipient', '=', recipient)
    .where('events.type', '=', type)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

describe('tracking host name per sending domain', () => {
  let domain: DomainBody;
  /** The tracked URLs (paths) of a message acme sent once its tracking host was verified. */
  const acme = { click: '', open: '', unsubscribe: '' };

  it('PATCH sets it: a pending CNAME to the public URL host in dns_records; names outside the domain are 422, another tenant gets 404', async () => {
    domain = await addDomain(ctx, t.apiKey, 'acme.test');
    const res = await patch(t.apiKey, domain.id, 'Click.Acme.Test.');
    expect(res.statusCode, res.body).toBe(200);
    const rec = (res.json() as DomainBody).dns_records.find((r) => (r.purpose as string) === 'tracking');
    expect(rec).toMatchObject({
      type: 'CNAME',
      name: 'click.acme.test',
      value: PUBLIC_HOST,
      status: 'pending',
      required: false,
    });
    for (const bad of ['click.other.test', 'bounces.acme.test', PUBLIC_HOST, 'not a host', 'acme.test.evil.test']) {
      const r = await patch(t.apiKey, domain.id, bad);
      expect(r.statusCode, bad).toBe(422);
      expect(r.json().errors[0]).toMatchObject({ code: 'validation_failed', field: 'tracking_hostname' });
    }
    expect((await patch(other.apiKey, domain.id, 'click.acme.test')).statusCode).toBe(404);
    const got = await call(ctx.app, 'GET', `/v1/sending-domains/${domain.id}`, { key: t.apiKey });
    expect((got.json() as DomainBody).dns_records.filter((r) => (r.purpose as string) === 'tracking')).toHaveLength(1);
  });

  it('until verified, mail links use the public URL; a CNAME pointing elsewhere fails with the reason', async () => {
    const before = await send('before@dest.test');
    expect(before.html).toMatch(new RegExp(`href="${publicBase}/c/[A-Za-z0-9_-]+"`));
    dns.set('click.acme.test', 'CNAME', ['elsewhere.example']);
    const v = await verifyDomain(ctx, t.apiKey, domain.id);
    const rec = v.dns_records.find((r) => (r.purpose as string) === 'tracking');
    expect(rec?.status).toBe('failed');
    expect(rec?.error).toContain(`instead of ${PUBLIC_HOST}`);
  });

  it('once verified: links, pixel and the https List-Unsubscribe use the tracking host, and the routes answer there', async () => {
    publish(dns, domain);
    dns.set('click.acme.test', 'CNAME', [PUBLIC_HOST]);
    const v = await verifyDomain(ctx, t.apiKey, domain.id);
    expect(v.dns_records.find((r) => (r.purpose as string) === 'tracking')?.status).toBe('verified');
    expect(v.status).toBe('verified');

    const trackBase = `http://click.acme.test:${port}`;
    const m = await send('after@dest.test');
    const click = m.html.match(new RegExp(`<a id="go" href="${trackBase}(/c/[A-Za-z0-9_-]+)">`))?.[1];
    expect(click, m.html).toBeTruthy();
    expect(m.html).toMatch(new RegExp(`<img src="${trackBase}/o/[A-Za-z0-9_-]+"`));
    expect(m.head).toMatch(new RegExp(`^List-Unsubscribe: <${trackBase}/u/[A-Za-z0-9_-]+>, <mailto:`, 'm'));
    expect(m.html).not.toContain(PUBLIC_HOST);
    acme.click = click as string;
    acme.open = m.html.match(new RegExp(`<img src="${trackBase}(/o/[A-Za-z0-9_-]+)"`))?.[1] ?? '';
    acme.unsubscribe = m.head.match(new RegExp(`^List-Unsubscribe: <${trackBase}(/u/[A-Za-z0-9_-]+)>`, 'm'))?.[1] ?? '';

    // What a browser does after click.acme.test resolved to this server (CNAME -> public host).
    const r = await getWithHost('click.acme.test', click as string);
    expect(r).toEqual({ status: 302, location: 'https://shop.acme.test/sale?x=1' });
    // The same token answers the same on the public host; no URL is ever built from the Host
    // header (a host name only decides whose tokens it honours: the next test).
    expect(await getWithHost(PUBLIC_HOST, click as string)).toEqual({
      status: 302,
      location: 'https://shop.acme.test/sale?x=1',
    });
    expect((await getWithHost('evil.example', '/c/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).status).toBe(404);
  });

  it("a token is honoured only on its own tenant's tracking host and the public host: another tenant's host, or nobody's, answers 404 and records nothing", async () => {
    // The other tenant verifies its own domain and tracking host name.
    const od = await addDomain(ctx, other.apiKey, 'other.test');
    const withHost = await patch(other.apiKey, od.id, 'click.other.test');
    expect(withHost.statusCode).toBe(200);
    publish(dns, withHost.json() as DomainBody);
    const v = await verifyDomain(ctx, other.apiKey, od.id);
    expect(v.status).toBe('verified');
    expect(v.dns_records.find((r) => (r.purpose as string) === 'tracking')?.status).toBe('verified');

    const recipient = 'after@dest.test';
    const clicks = await eventCount(recipient, 'message.clicked');
    const opens = await eventCount(recipient, 'message.opened');
    // acme's click, open and unsubscribe on the other tenant's tracking host, and on a name that is
    // nobody's tracking host: the 404 of an unknown token, no redirect, nothing recorded.
    for (const host of ['click.other.test', 'nobodys.example']) {
      const click = await getWithHost(host, acme.click);
      expect(click, host).toEqual({ status: 404 });
      expect((await getWithHost(host, acme.open)).status, host).toBe(404);
      expect((await getWithHost(host, acme.unsubscribe)).status, host).toBe(404);
      expect((await getWithHost(host, acme.unsubscribe, 'List-Unsubscribe=One-Click')).status, host).toBe(404);
    }
    expect(await eventCount(recipient, 'message.clicked')).toBe(clicks);
    expect(await eventCount(recipient, 'message.opened')).toBe(opens);
    expect(await eventCount(recipient, 'message.unsubscribed')).toBe(0);
    const suppressed = await call(ctx.app, 'GET', `/v1/suppressions?identifier=${recipient}`, { key: t.apiKey });
    expect(suppressed.json().data).toEqual([]);

    // On acme's own tracking host (and the public host) the same links work.
    for (const host of ['click.acme.test', PUBLIC_HOST]) {
      expect(await getWithHost(host, acme.click), host).toEqual({
        status: 302,
        location: 'https://shop.acme.test/sale?x=1',
      });
      expect((await getWithHost(host, acme.open)).status, host).toBe(200);
      expect((await getWithHost(host, acme.unsubscribe)).status, host).toBe(200);
    }
    expect(await eventCount(recipient, 'message.clicked')).toBe(clicks + 2);

    // The other tenant's token: on its own host it redirects, on acme's it does not.
    const accepted = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: other.apiKey,
      body: {
        recipients: [{ email: 'o@dest.test' }],
        content: { from: 'Other <news@other.test>', subject: 'Hi', text: 'x' },
      },
    });
    expect(accepted.statusCode, accepted.body).toBe(202);
    const messageId = (
      await ctx.c.database.db
        .selectFrom('messages')
        .select('id')
        .where('recipient', '=', 'o@dest.test')
        .executeTakeFirstOrThrow()
    ).id;
    const otherClick = `/c/${signToken(deriveTokenKey(ctx.c.masterKey), { kind: 'click', messageId, link: 0, url: 'https://other.test/' })}`;
    expect(await getWithHost('click.other.test', otherClick)).toEqual({ status: 302, location: 'https://other.test/' });
    expect(await getWithHost('click.acme.test', otherClick)).toEqual({ status: 404 });
  });

  it('PATCH null removes it: mail goes back to the public URL', async () => {
    const res = await patch(t.apiKey, domain.id, null);
    expect(res.statusCode).toBe(200);
    expect((res.json() as DomainBody).dns_records.some((r) => (r.purpose as string) === 'tracking')).toBe(false);
    const m = await send('removed@dest.test');
    expect(m.html).toMatch(new RegExp(`href="${publicBase}/c/[A-Za-z0-9_-]+"`));
  });
});
