/**
 * Two "nodes" (two containers on one database): a PATCH made on one is followed by the other's
 * dispatcher within 5 s, and two dispatchers sharing the queue deliver every event (at least once).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { call, createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import {
  createWebhook,
  emit,
  eventsOf,
  eventually,
  FAST,
  newEvent,
  type Receiver,
  sleep,
  startDispatcher,
  startReceiver,
} from './helpers.ts';

let nodeA: TestContext;
let nodeB: TestContext;
const stops: WebhookDispatcher[] = [];
const receivers: Receiver[] = [];

beforeAll(async () => {
  nodeA = await createTestContext();
  nodeB = await createTestContext({ shareWith: nodeA });
});
afterAll(async () => {
  for (const d of stops) await d.stop();
  for (const r of receivers) await r.close();
  await nodeB?.close();
  await nodeA?.close();
});

async function receiver() {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

describe('across nodes', () => {
  it('a PATCH made on node A is followed by node B within 5 s (subscriptions and URL)', async () => {
    const t = await createTenant(nodeA);
    const before = await receiver();
    const after = await receiver();
    // Node B dispatches with the production registry cache (2 s) and polling.
    const d = startDispatcher(nodeB, { ...FAST, idlePollMs: 1000, fanoutIntervalMs: 100 }, 'node-b');
    stops.push(d);
    const w = await createWebhook(nodeA, t.apiKey, { url: before.url, events: ['message.delivered'] });
    // Wait until node B delivers for this webhook, so its cache certainly holds the old version.
    await emit(nodeA, [newEvent(t.tenantId, { type: 'message.delivered' })]);
    await before.waitFor((r) => r.length >= 1, 8000);

    const patched = await call(nodeA.app, 'PATCH', `/v1/webhooks/${w.id}`, {
      key: t.apiKey,
      body: { url: after.url, events: ['message.accepted'] },
    });
    expect(patched.statusCode).toBe(200);
    const t0 = Date.now();
    // Emit a fresh event every 100 ms; the first one node B routes by the new settings ends it.
    let firstSeen = 0;
    while (Date.now() - t0 < 7000 && !firstSeen) {
      await emit(nodeA, [newEvent(t.tenantId, { type: 'message.accepted' })]);
      await sleep(100);
      if (after.received.length) firstSeen = after.received[0]!.at;
    }
    expect(firstSeen, 'node B never used the new settings').toBeGreaterThan(0);
    expect(firstSeen - t0).toBeLessThan(5000);
    // Once switched, nothing more goes to the old URL.
    const oldCount = before.received.length;
    await emit(nodeA, [
      newEvent(t.tenantId, { type: 'message.accepted' }),
      newEvent(t.tenantId, { type: 'message.delivered' }),
    ]);
    await sleep(1500);
    expect(before.received.length).toBe(oldCount);
    expect(eventsOf(before.received).every((e) => e.type === 'message.delivered')).toBe(true);
    await d.stop();
  }, 20_000);

  it('two dispatchers sharing the queue deliver every event at least once', async () => {
    const t = await createTenant(nodeA);
    const rx = await receiver();
    const single = await createWebhook(nodeA, t.apiKey, { url: rx.url, events: ['message.opened'] });
    const batch = await createWebhook(nodeA, t.apiKey, {
      url: rx.url,
      events: ['message.opened'],
      dispatch_policy: 'batch',
      batch_max_size: 20,
      batch_max_wait_ms: 50,
    });
    const a = startDispatcher(nodeA, FAST, 'node-a');
    const b = startDispatcher(nodeB, FAST, 'node-b2');
    stops.push(a, b);
    const rows = await emit(
      nodeA,
      Array.from({ length: 300 }, () => newEvent(t.tenantId, { type: 'message.opened' })),
    );
    const want = new Set(rows.map((r) => r.id));
    await rx.waitFor((r) => eventsOf(r).length >= 600, 20_000);
    const got = eventsOf(rx.received).map((e) => e.id);
    // Every event reached both webhooks: 300 single POSTs and 300 events in batches.
    expect(new Set(got)).toEqual(want);
    const batches = rx.received.filter((r) => r.body.startsWith('{"batch_id"'));
    const singles = rx.received.filter((r) => !r.body.startsWith('{"batch_id"'));
    expect(new Set(singles.map((r) => r.headers['webhook-id']))).toEqual(want);
    expect(new Set(eventsOf(batches).map((e) => e.id))).toEqual(want);
    const left = () =>
      nodeA.c.database.db
        .selectFrom('webhook_queue')
        .select('id')
        .where('webhook_id', 'in', [single.id, batch.id])
        .execute();
    await eventually(async () => (await left()).length === 0, 5000, 'queue drained');
    await a.stop();
    await b.stop();
  }, 30_000);
});
