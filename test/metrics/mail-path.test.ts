/**
 * Metrics of the mail path (docs/operations.md "Metrics"): mail sent over HTTP and SMTP to a real
 * sink MX, webhooks POSTed to a real receiver and a tracking open move the series that the
 * Grafana dashboard and the alert rules use. Render threads are on (POSTYARD_RENDER_THREADS=1):
 * their render and DKIM times must reach the main registry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stoppable } from '../../src/engine.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import { start as startWebhooks } from '../../src/modules/webhooks/engine.ts';
import { type RunningSmtpServer, startSmtpServer } from '../../src/smtp/server.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { metricValue } from '../helpers/metrics.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { mailer, newCredential } from '../smtp/helpers.ts';
import { createWebhook, eventually, type Receiver, startReceiver } from '../webhooks/helpers.ts';

let ctx: TestContext;

/** The Host a browser sends for a link on the public URL: tokens are honoured on that host (docs/tracking.md). */
const publicHost = () => new URL(ctx.c.config.publicUrl).host;
let t: TestTenant;
let dnsServer: DnsServer;
let sink: SinkMx;
let receiver: Receiver;
let smtp: RunningSmtpServer;
let worker: DeliveryWorker | undefined;
let webhooks: Stoppable | undefined;
const signing = testSigningKey();

async function scrape(): Promise<string> {
  const res = await ctx.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain/);
  return res.body;
}

beforeAll(async () => {
  sink = await startSinkMx({
    script: ({ rcpt }) => (rcpt.startsWith('unknown') ? { code: 550, message: '5.1.1 No such user' } : 'accept'),
  });
  dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
    ...signing.zone,
  });
  receiver = await startReceiver();
  ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dnsServer.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
      POSTYARD_RENDER_THREADS: '1',
    },
  });
  t = await createTenant(ctx, 'Shop <news@shop.test>');
  smtp = await startSmtpServer(ctx.c, { port: 0, host: '127.0.0.1' });
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await webhooks?.stop();
  await smtp?.close();
  await ctx?.close();
  await sink?.close();
  await receiver?.close();
  await dnsServer?.close();
});

describe('mail path metrics', () => {
  it('every mail-path family is exposed before any mail, with the known label sets at 0', async () => {
    const text = await scrape();
    for (const result of ['accepted', 'refused'])
      expect(metricValue(text, 'postyard_smtp_messages_total', { result })).toBe(0);
    for (const outcome of ['success', 'http_error', 'network_error'])
      expect(metricValue(text, 'postyard_webhook_attempts_total', { outcome })).toBe(0);
    expect(metricValue(text, 'postyard_delivery_claimed_messages_total')).toBe(0);
    expect(metricValue(text, 'postyard_render_duration_seconds_count')).toBe(0);
    expect(metricValue(text, 'postyard_queue_messages', { state: 'queued' })).toBe(0);
    expect(metricValue(text, 'postyard_queue_oldest_due_seconds')).toBe(0);
  });

  it('sending through HTTP and SMTP to a real sink moves queue, claim, delivery, render, SMTP, webhook and tracking series', async () => {
    await createWebhook(ctx, t.apiKey, { url: receiver.url, events: ['message.delivered', 'message.bounced'] });
    // Accepted while no worker runs: the queue holds them.
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: [{ email: 'ann@dest.test' }, { email: 'bob@dest.test' }, { email: 'unknown@dest.test' }],
        content: { subject: 'Hi', text: 'Hello', html: '<p>Hello</p>' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const cred = await newCredential(ctx, t.tenantId);
    await mailer(smtp.port, cred).sendMail({
      from: 'news@shop.test',
      to: 'cid@dest.test',
      subject: 'over SMTP',
      text: 'Hello',
    });

    // The queue gauge is sampled at scrape time and kept 5 s: it may take one cache period.
    await eventually(async () => {
      const queued = metricValue(await scrape(), 'postyard_queue_messages', { state: 'queued' }) ?? 0;
      return queued >= 4 ? queued : undefined;
    }, 15_000);

    worker = startTestWorker(ctx.c, 'metrics-worker', { signing });
    webhooks = startWebhooks(ctx.c);
    await eventually(async () => (sink.messages.length >= 3 ? true : undefined), 30_000);

    const text = await eventually(async () => {
      const s = await scrape();
      const delivered = metricValue(s, 'postyard_delivery_attempts_total', { outcome: 'delivered' }) ?? 0;
      const bounced = metricValue(s, 'postyard_delivery_attempts_total', { outcome: 'bounced' }) ?? 0;
      const posted = metricValue(s, 'postyard_webhook_attempts_total', { outcome: 'success' }) ?? 0;
      return delivered >= 3 && bounced >= 1 && posted >= 1 ? s : undefined;
    }, 30_000);

    // Delivery: claims, outcomes by site (an unknown MX host is `other`), acceptance-to-delivery.
    expect(metricValue(text, 'postyard_delivery_claimed_messages_total')).toBeGreaterThanOrEqual(4);
    expect(metricValue(text, 'postyard_delivery_claims_total')).toBeGreaterThanOrEqual(1);
    expect(metricValue(text, 'postyard_delivery_attempts_total', { outcome: 'delivered', site: 'other' })).toBe(3);
    expect(metricValue(text, 'postyard_delivery_attempts_total', { outcome: 'bounced', site: 'other' })).toBe(1);
    expect(metricValue(text, 'postyard_delivery_accept_to_delivered_seconds_count')).toBe(3);
    expect(metricValue(text, 'postyard_delivery_accept_to_delivered_seconds_sum')).toBeGreaterThan(0);
    // Rendered and signed on the render thread, counted in this registry.
    expect(metricValue(text, 'postyard_render_duration_seconds_count')).toBe(4);
    expect(metricValue(text, 'postyard_dkim_sign_duration_seconds_count')).toBe(4);
    expect(metricValue(text, 'postyard_dkim_sign_duration_seconds_sum')).toBeGreaterThan(0);
    // SMTP submission: one session, one message accepted.
    expect(metricValue(text, 'postyard_smtp_sessions_total')).toBeGreaterThanOrEqual(1);
    expect(metricValue(text, 'postyard_smtp_messages_total', { result: 'accepted' })).toBe(1);
    // Webhooks: POSTs accepted by the receiver, with their lag.
    expect(metricValue(text, 'postyard_webhook_delivery_lag_seconds_count')).toBeGreaterThanOrEqual(1);
    // No tenant data in labels: no tenant id, no recipient domain (its MX site is `other`).
    expect(text).not.toContain(t.tenantId);
    expect(text).not.toContain('dest.test');
    // HTTP metrics were there before; still there.
    expect(metricValue(text, 'postyard_http_requests_total', { route: '/v1/transmissions', status_code: '202' })).toBe(
      1,
    );

    // Tracking: an open of one of these messages.
    const messageId = (res.json() as { messages?: { id: string }[] }).messages?.[0]?.id;
    const id =
      messageId ??
      (
        await ctx.c.database.db
          .selectFrom('messages')
          .select('id')
          .where('recipient', '=', 'ann@dest.test')
          .executeTakeFirstOrThrow()
      ).id;
    const token = signToken(deriveTokenKey(ctx.c.masterKey), { kind: 'open', messageId: id });
    const open = await ctx.app.inject({ method: 'GET', url: `/o/${token}`, headers: { host: publicHost() } });
    expect(open.statusCode).toBe(200);
    expect(metricValue(await scrape(), 'postyard_tracking_events_total', { kind: 'open' })).toBe(1);

    // Once the cache period is over, the queue gauge shows the queue drained.
    await eventually(async () => {
      const s = await scrape();
      const left = ['queued', 'deferred', 'sending'].map(
        (state) => metricValue(s, 'postyard_queue_messages', { state }) ?? -1,
      );
      return left.every((n) => n === 0) ? true : undefined;
    }, 20_000);
  }, 120_000);
});
