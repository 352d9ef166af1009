/**
 * A single-policy lane claims several times its POST slots ahead (dispatcher.ts CLAIM_AHEAD).
 * When the endpoint starts failing, what was claimed but not sent is given back at once, with
 * no attempt counted: every event's attempts stay 1, 2, 3 ... in the log, nothing is lost and
 * nothing is sent twice that was not retried.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import {
  createWebhook,
  deliveriesOf,
  emit,
  eventsOf,
  eventually,
  newEvent,
  type Receiver,
  startDispatcher,
  startReceiver,
} from './helpers.ts';

let ctx: TestContext;
let dispatcher: WebhookDispatcher | undefined;
let rx: Receiver | undefined;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await dispatcher?.stop();
  await rx?.close();
  await ctx?.close();
});

async function failOnceThenDeliver(perWebhookConcurrency: number) {
  const t = await createTenant(ctx);
  // The first POST fails; everything after it succeeds.
  rx = await startReceiver((r) => (r.n === 1 ? { status: 500, body: 'once' } : { status: 204 }));
  const w = await createWebhook(ctx, t.apiKey, { url: rx.url });
  const rows = await emit(
    ctx,
    Array.from({ length: 60 }, () => newEvent(t.tenantId)),
  );
  dispatcher = startDispatcher(ctx, {
    retryDelaysMs: [300, 300],
    jitter: 0,
    fanoutIntervalMs: 20,
    idlePollMs: 50,
    flushIntervalMs: 20,
    perWebhookConcurrency,
  });
  const log = await eventually(async () => {
    const l = await deliveriesOf(ctx, t.apiKey, w.id);
    return l.filter((d) => d.outcome === 'delivered').length === 60 ? l : null;
  }, 15_000);
  const byEvent = new Map<string, number[]>();
  for (const d of [...log].reverse()) {
    for (const id of d.event_ids as string[]) byEvent.set(id, [...(byEvent.get(id) ?? []), d.attempt as number]);
  }
  expect([...byEvent.keys()].sort()).toEqual(rows.map((r) => r.id).sort());
  const retried = [...byEvent.values()].filter((a) => a.length > 1);
  expect(retried).toEqual([[1, 2]]);
  expect([...byEvent.values()].filter((a) => a.length === 1).every((a) => a[0] === 1)).toBe(true);
  // 60 events, one of them sent twice.
  expect(eventsOf(rx.received)).toHaveLength(61);
  expect(
    await ctx.c.database.db.selectFrom('webhook_queue').select('id').where('webhook_id', '=', w.id).execute(),
  ).toEqual([]);
  await dispatcher.stop();
  dispatcher = undefined;
  await rx.close();
  rx = undefined;
}

it('a failure gives back the claimed-ahead units; attempts are counted only for POSTs made', async () => {
  await failOnceThenDeliver(16);
});

it('a failure while a unit is partly in flight splits off its unsent events (no attempt counted)', async () => {
  // 4 slots: the first unit (16 events) has 4 POSTs in flight and 12 waiting when the first fails.
  await failOnceThenDeliver(4);
});
