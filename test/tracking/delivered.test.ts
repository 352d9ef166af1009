/**
 * Tracking end to end, default configuration (render threads on): messages delivered to the sink
 * MX carry tracked links, the open pixel, List-Unsubscribe (https + mailto) and
 * List-Unsubscribe-Post under a DKIM signature that mailauth verifies, and a real Chromium that
 * clicks the tracked link lands on the original page (a local server on loopback).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { HAVE_CHROMIUM, launchBrowser } from '../dashboard/browser-helpers.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type DkimVerifier, startDkimVerifier } from '../peers/dkim-verifier.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';

let ctx: TestContext;
let t: TestTenant;
let dns: DnsServer;
let sink: SinkMx;
let verifier: DkimVerifier;
let worker: DeliveryWorker;
let landing: Server;
let landingUrl: string;
let browser: Browser | undefined;
const landed: string[] = [];
const signing = testSigningKey('example.com');

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

beforeAll(async () => {
  landing = createServer((req, res) => {
    landed.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/html' }).end('<title>Landed</title><p>the sale</p>');
  });
  await new Promise<void>((r) => landing.listen(0, '127.0.0.1', r));
  landingUrl = `http://127.0.0.1:${(landing.address() as AddressInfo).port}`;
  sink = await startSinkMx({ tls: false });
  dns = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  verifier = await startDkimVerifier('example.com', 's1', signing.keys.publicKeyBase64);
  const port = await freePort();
  ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dns.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
      POSTYARD_PUBLIC_URL: `http://127.0.0.1:${port}`,
    },
  });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  t = await createTenant(ctx, 'Shop <news@example.com>');
  worker = startTestWorker(ctx.c, 'tracking-delivered', { signing });
  if (HAVE_CHROMIUM) browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  await ctx?.close();
  await sink?.close();
  await verifier?.close();
  await dns?.close();
  await new Promise((r) => landing?.close(r));
});

async function send(email: string, mailType: 'transactional' | 'marketing') {
  const html =
    `<html><body><p>Hello</p><a id="go" href="${landingUrl}/sale?x=1&amp;y=2">Sale</a> ` +
    '<a href="mailto:help@example.com">mail us</a> ' +
    `<a data-postyard-track="false" href="${landingUrl}/plain">plain</a></body></html>`;
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email }],
      content: { from: 'Shop <news@example.com>', subject: 'Sale', html, text: `Sale: ${landingUrl}/sale?x=1&y=2` },
      options: { mail_type: mailType, tags: ['spring-sale'] },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  const end = Date.now() + 30_000;
  for (;;) {
    const m = sink.messages.find((x) => x.rcptTo.includes(email));
    if (m) return m;
    if (Date.now() > end) throw new Error(`nothing delivered to ${email}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('delivered tracking', () => {
  it('marketing mail: tracked links and pixel in html, text untouched, List-Unsubscribe + Post + Feedback-ID under a DKIM signature mailauth verifies', async () => {
    const m = await send('reader@dest.test', 'marketing');
    expect(await verifier.verify(m.raw)).toBe('pass');
    const parsed = await simpleParser(m.raw);
    const head = (m.raw.toString('latin1').split('\r\n\r\n')[0] ?? '').replace(/\r\n[ \t]+/g, ' ');
    const dkim = head.match(/^DKIM-Signature:.*$/im)?.[0].replace(/\s+/g, '') ?? '';
    expect(dkim).toMatch(/h=[^;]*list-unsubscribe:list-unsubscribe-post:feedback-id;/i);
    const base = ctx.c.config.publicUrl;
    expect(head).toMatch(
      new RegExp(
        `^List-Unsubscribe: <${base}/u/[A-Za-z0-9_-]+>, <mailto:unsubscribe\\+[A-Za-z0-9_-]+@bounces\\.example\\.com>`,
        'm',
      ),
    );
    expect(head).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
    expect(head).toMatch(new RegExp(`^Feedback-ID: spring-sale:marketing:${t.tenantId}:postyard$`, 'm'));
    const html = parsed.html || '';
    expect(html).toMatch(new RegExp(`<a id="go" href="${base}/c/[A-Za-z0-9_-]+">Sale</a>`));
    expect(html).toContain('<a href="mailto:help@example.com">');
    expect(html).toContain(`<a href="${landingUrl}/plain">plain</a>`);
    expect(html).toMatch(new RegExp(`<img src="${base}/o/[A-Za-z0-9_-]+" width="1" height="1"`));
    expect(parsed.text).toContain(`${landingUrl}/sale?x=1&y=2`);

    // The one-click POST exactly as Gmail sends it, to the URL from the delivered header.
    const uUrl = head.match(/List-Unsubscribe: <([^>]+)>/)?.[1] ?? '';
    const post = await fetch(uUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
    });
    expect(post.status).toBe(200);
    const s = (await call(ctx.app, 'GET', '/v1/suppressions?identifier=reader@dest.test', { key: t.apiKey })).json()
      .data;
    expect(s).toMatchObject([{ scope: 'marketing', source: 'unsubscribe', reason_category: 'unsubscribe' }]);
  });

  it.skipIf(!HAVE_CHROMIUM)(
    'a real Chromium follows the tracked link of a delivered message and lands on the original URL',
    async () => {
      const m = await send('clicker@dest.test', 'marketing');
      const html = (await simpleParser(m.raw)).html || '';
      const page = await browser!.newPage();
      try {
        await page.setContent(html);
        await Promise.all([page.waitForURL(`${landingUrl}/**`), page.click('#go')]);
        expect(page.url()).toBe(`${landingUrl}/sale?x=1&y=2`);
        expect(await page.title()).toBe('Landed');
      } finally {
        await page.close();
      }
      expect(landed).toContain('/sale?x=1&y=2');
      const ev = await ctx.c.database.db
        .selectFrom('events')
        .select(['data', 'message_id'])
        .where('type', '=', 'message.clicked')
        .where('recipient', '=', 'clicker@dest.test')
        .execute();
      expect(ev.map((e) => JSON.parse(e.data))).toMatchObject([
        { url: `${landingUrl}/sale?x=1&y=2`, first: true, machine: true },
      ]);
    },
  );

  it('transactional mail: links and html untouched, no List-Unsubscribe, but a Feedback-ID', async () => {
    const m = await send('reset@dest.test', 'transactional');
    expect(await verifier.verify(m.raw)).toBe('pass');
    const head = (m.raw.toString('latin1').split('\r\n\r\n')[0] ?? '').replace(/\r\n[ \t]+/g, ' ');
    expect(head).not.toMatch(/^List-Unsubscribe/im);
    expect(head).toMatch(/^Feedback-ID: spring-sale:transactional:/m);
    const html = (await simpleParser(m.raw)).html || '';
    expect(html).toContain(`href="${landingUrl}/sale?x=1&amp;y=2"`);
    expect(html).not.toContain('/o/');
  });
});
