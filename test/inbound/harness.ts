/**
 * Shared setup for the inbound tests: a test context (SQLite, or the PostgreSQL of
 * TEST_DATABASE_URL), two tenants, a real delivery worker sending to a sink MX on loopback (so
 * messages reach `delivered` the normal way, with their VERP envelope sender), and the inbound
 * listener on a free loopback port. Reports are sent to it with nodemailer over real SMTP.
 */
import nodemailer from 'nodemailer';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { type RunningInbound, startInboundServer } from '../../src/smtp/inbound-listener.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';

export interface Harness {
  ctx: TestContext;
  a: TestTenant;
  b: TestTenant;
  sink: SinkMx;
  inbound: RunningInbound;
  close(): Promise<void>;
}

/**
 * Tenant A sends From shop.test, tenant B From other.test. The worker finds no signing key for
 * either, so every envelope sender is `bounces+<token>@<POSTYARD_BOUNCE_HOST>` (bounce.postyard.test).
 */
export async function startHarness(env: Record<string, string> = {}): Promise<Harness> {
  const sink = await startSinkMx({ script: () => 'accept' });
  const dnsServer: DnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  const ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dnsServer.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
      POSTYARD_BOUNCE_HOST: 'bounce.postyard.test',
      ...env,
    },
  });
  const a = await createTenant(ctx, 'Shop <news@shop.test>');
  const b = await createTenant(ctx, 'Other <news@other.test>');
  const worker: DeliveryWorker = createDeliveryWorker(ctx.c, 'test-worker', {
    pollMs: 50,
    signingKey: async () => null,
  });
  worker.start();
  const inbound = await startInboundServer(ctx.c, { port: 0, host: '127.0.0.1' });
  return {
    ctx,
    a,
    b,
    sink,
    inbound,
    async close() {
      await inbound.close();
      await worker.stop();
      await ctx.close();
      await sink.close();
      await dnsServer.close();
    },
  };
}

export interface Sent {
  messageId: string;
  transmissionId: string;
  /** The envelope sender the MX saw: `bounces+<token>@<return-path domain>`. */
  envelopeFrom: string;
  recipient: string;
}

/** Sends one message through the API and waits until the sink MX has it (state delivered). */
export async function deliver(h: Harness, tenant: TestTenant, recipient: string, extra: object = {}): Promise<Sent> {
  const res = await call(h.ctx.app, 'POST', '/v1/transmissions', {
    key: tenant.apiKey,
    body: { recipients: [{ email: recipient }], content: { subject: 'Hello', text: 'Hello there' }, ...extra },
  });
  if (res.statusCode !== 202) throw new Error(`send failed: ${res.body}`);
  const transmissionId = res.json().transmission_id as string;
  const end = Date.now() + 20_000;
  for (;;) {
    const row = await h.ctx.c.database.db
      .selectFrom('messages')
      .select(['id', 'state'])
      .where('transmission_id', '=', transmissionId)
      .executeTakeFirst();
    if (row?.state === 'delivered') {
      const got = h.sink.messages.find((m) => m.rcptTo.includes(recipient) && m.raw.toString().includes(row.id));
      if (!got) throw new Error('delivered but not at the sink');
      return { messageId: row.id, transmissionId, envelopeFrom: got.mailFrom, recipient };
    }
    if (Date.now() > end) throw new Error(`not delivered: ${JSON.stringify(row)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Sends raw bytes to the inbound listener over SMTP (null sender, as MTAs send DSNs). */
export async function sendInbound(port: number, to: string[], raw: string | Buffer, from = '') {
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  try {
    return await transport.sendMail({ envelope: { from, to }, raw });
  } finally {
    transport.close();
  }
}

export async function stateOf(h: Harness, messageId: string) {
  const row = await h.ctx.c.database.db
    .selectFrom('messages')
    .select('state')
    .where('id', '=', messageId)
    .executeTakeFirstOrThrow();
  return row.state;
}

export async function eventsOf(h: Harness, messageId: string) {
  const rows = await h.ctx.c.database.db
    .selectFrom('events')
    .selectAll()
    .where('message_id', '=', messageId)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ type: r.type, data: JSON.parse(r.data) as Record<string, unknown>, tenant: r.tenant_id }));
}

export async function suppressionOf(h: Harness, tenantId: string, email: string) {
  return h.ctx.c.database.db
    .selectFrom('suppressions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('identifier', '=', email)
    .executeTakeFirst();
}

export async function inboundCount(h: Harness, result: string): Promise<number> {
  const m = await h.inbound.counter.get();
  return m.values.find((v) => v.labels.result === result)?.value ?? 0;
}
