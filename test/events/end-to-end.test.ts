/**
 * End to end: POST /v1/transmissions -> delivery to a local MX sink -> message.accepted and
 * message.delivered on a signed webhook and in GET /v1/events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import type { EventView } from '../../src/modules/events/events.types.ts';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import {
  createWebhook,
  eventsOf,
  eventually,
  FAST,
  type Receiver,
  startDispatcher,
  startReceiver,
  verify,
} from '../webhooks/helpers.ts';

let ctx: TestContext;
let t: TestTenant;
let dnsServer: DnsServer;
let sink: SinkMx;
let worker: DeliveryWorker;
let dispatcher: WebhookDispatcher;
let rx: Receiver;

beforeAll(async () => {
  sink = await startSinkMx({ script: () => 'accept' });
  dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  ctx = await createTestContext({
    env: {
      POSTYARD_DNS_SERVERS: dnsServer.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
    },
  });
  t = await createTenant(ctx, 'Shop <news@shop.test>');
  worker = createDeliveryWorker(ctx.c, 'e2e-worker', { pollMs: 50 });
  worker.start();
  dispatcher = startDispatcher(ctx, FAST, 'e2e-node');
  rx = await startReceiver();
});
afterAll(async () => {
  await dispatcher?.stop();
  await worker?.stop();
  await rx?.close();
  await ctx?.close();
  await sink?.close();
  await dnsServer?.close();
});

describe('a transmission, seen through webhooks and the events API', () => {
  it('produces message.accepted then message.delivered, signed, on the webhook and in GET /v1/events', async () => {
    const hook = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.accepted', 'message.delivered'] });
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: [{ email: 'ann@dest.test', metadata: { crm_id: '42' } }],
        content: { subject: 'Hi', text: 'Hello' },
        options: { tags: ['welcome'] },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const transmissionId = res.json().transmission_id as string;

    await rx.waitFor((r) => eventsOf(r).some((e) => e.type === 'message.delivered'), 20_000);
    for (const rec of rx.received) verify(hook.secret, rec);
    const onHook = eventsOf(rx.received).filter((e) => e.transmission_id === transmissionId);
    const accepted = onHook.find((e) => e.type === 'message.accepted') as EventView;
    const delivered = onHook.find((e) => e.type === 'message.delivered') as EventView;
    expect(accepted).toMatchObject({
      recipient: 'ann@dest.test',
      tags: ['welcome'],
      metadata: { crm_id: '42' },
      tenant_id: t.tenantId,
    });
    expect(delivered.message_id).toBe(accepted.message_id);
    expect(delivered.data).toHaveProperty('mx_host');
    expect(sink.messages.length).toBeGreaterThanOrEqual(1);

    const listed = await eventually(async () => {
      const page = (
        await call(ctx.app, 'GET', '/v1/events', { key: t.apiKey, query: { transmission_id: transmissionId } })
      ).json();
      return page.data.length >= 2 ? (page.data as EventView[]) : null;
    });
    expect(listed.map((e) => e.type)).toEqual(['message.delivered', 'message.accepted']); // newest first
    expect(listed.find((e) => e.type === 'message.accepted')).toEqual(accepted);
    expect(listed.find((e) => e.type === 'message.delivered')).toEqual(delivered);
    const tagged = (
      await call(ctx.app, 'GET', '/v1/events', { key: t.apiKey, query: { tag: 'welcome', type: 'message.accepted' } })
    ).json();
    expect(tagged.data.map((e: EventView) => e.id)).toContain(accepted.id);
  }, 40_000);
});
