/** The dispatcher against a real HTTP receiver: signatures, policies, retries, disabling, isolation. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WebhookDispatcher } from '../../src/modules/webhooks/dispatcher.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import {
  createWebhook,
  deliveriesOf,
  emit,
  eventsOf,
  eventually,
  FAST,
  newEvent,
  type Receiver,
  sleep,
  startDispatcher,
  startReceiver,
  verify,
} from './helpers.ts';

let ctx: TestContext;
let dispatcher: WebhookDispatcher;
const receivers: Receiver[] = [];

beforeAll(async () => {
  ctx = await createTestContext();
  dispatcher = startDispatcher(ctx);
});
afterAll(async () => {
  await dispatcher?.stop();
  await ctx?.close();
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function receiver(respond?: Parameters<typeof startReceiver>[0]) {
  const r = await startReceiver(respond);
  receivers.push(r);
  return r;
}

async function webhookRow(id: string) {
  return ctx.c.database.db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

async function queued(webhookId: string) {
  return ctx.c.database.db.selectFrom('webhook_queue').selectAll().where('webhook_id', '=', webhookId).execute();
}

describe('single policy', () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await createTenant(ctx);
  });

  it('delivers each subscribed event as its own signed POST (Standard Webhooks, verified by the library)', async () => {
    const rx = await receiver();
    const w = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.accepted', 'message.delivered'] });
    const rows = await emit(ctx, [
      newEvent(t.tenantId, { tags: ['welcome'], metadata: { k: 'v' } }),
      newEvent(t.tenantId, { type: 'message.delivered', data: { mx_host: 'mx.example.com', tls: true } }),
      newEvent(t.tenantId, { type: 'message.bounced' }), // not subscribed
    ]);
    await rx.waitFor((r) => r.length >= 2);
    await sleep(200);
    expect(rx.received).toHaveLength(2);
    for (const rec of rx.received) {
      const body = verify(w.secret, rec) as { id: string };
      expect(rec.headers['webhook-id']).toBe(body.id);
      expect(rec.headers['content-type']).toBe('application/json');
      expect(Number(rec.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -1);
    }
    const byId = new Map(eventsOf(rx.received).map((e) => [e.id, e]));
    expect(byId.get(rows[0]!.id)).toEqual({
      id: rows[0]!.id,
      type: 'message.accepted',
      created_at: rows[0]!.created_at,
      tenant_id: t.tenantId,
      transmission_id: null,
      message_id: null,
      recipient: rows[0]!.recipient,
      mail_type: 'transactional',
      tags: ['welcome'],
      metadata: { k: 'v' },
      data: {},
    });
    expect(byId.get(rows[1]!.id)?.data).toEqual({ mx_host: 'mx.example.com', tls: true });
    await eventually(async () => (await queued(w.id)).length === 0, 5000, 'queue drained');
    const log = await deliveriesOf(ctx, t.apiKey, w.id);
    expect(log).toHaveLength(2);
    expect(log.every((d) => d.outcome === 'delivered' && d.status_code === 200 && d.test === false)).toBe(true);
  });

  it("never delivers another tenant's events", async () => {
    const rx = await receiver();
    const other = await createTenant(ctx);
    await createWebhook(ctx, t.apiKey, { url: rx.url });
    await emit(ctx, [newEvent(other.tenantId), newEvent(other.tenantId)]);
    const mine = await emit(ctx, [newEvent(t.tenantId)]);
    await rx.waitFor((r) => r.length >= 1);
    await sleep(300);
    expect(eventsOf(rx.received).map((e) => e.id)).toEqual([mine[0]!.id]);
  });

  it('retries failures on the schedule until 2xx; the log shows each attempt', async () => {
    const rx = await receiver((r) => (r.n <= 2 ? { status: 500, body: 'try later' } : { status: 204 }));
    const w = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.failed'] });
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.failed' })]);
    await rx.waitFor((r) => r.length >= 3);
    const ids = new Set(rx.received.map((r) => r.headers['webhook-id']));
    expect(ids.size).toBe(1); // the same message id on every retry
    expect(rx.received[1]!.at - rx.received[0]!.at).toBeGreaterThanOrEqual(90);
    const log = await eventually(async () => {
      const l = await deliveriesOf(ctx, t.apiKey, w.id);
      return l.length === 3 ? l : null;
    });
    expect(log.map((d) => [d.attempt, d.outcome, d.status_code])).toEqual([
      [3, 'delivered', 204],
      [2, 'retrying', 500],
      [1, 'retrying', 500],
    ]);
    expect(log[2]!.error).toContain('try later');
    expect(log[2]!.next_attempt_at).toBeTruthy();
    expect((await webhookRow(w.id)).failing_since).toBeNull();
  });

  it('gives up after the last retry: the attempt is marked failed and leaves the queue', async () => {
    const rx = await receiver(() => ({ status: 502 }));
    const w = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.opened'] });
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.opened' })]);
    // FAST has 3 retries: 4 attempts in all.
    await rx.waitFor((r) => r.length >= 4, 15_000);
    const log = await eventually(async () => {
      const l = await deliveriesOf(ctx, t.apiKey, w.id);
      return l.length === 4 ? l : null;
    }, 5000);
    expect(log[0]).toMatchObject({ attempt: 4, outcome: 'failed', next_attempt_at: null });
    expect(await queued(w.id)).toHaveLength(0);
    await sleep(400);
    expect(rx.received).toHaveLength(4);
    expect((await webhookRow(w.id)).failing_since).not.toBeNull();
  }, 30_000);

  it('honours Retry-After', async () => {
    const rx = await receiver((r) => (r.n === 1 ? { status: 503, headers: { 'retry-after': '2' } } : { status: 200 }));
    await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.clicked'] });
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.clicked' })]);
    await rx.waitFor((r) => r.length >= 2, 10_000);
    // The schedule says 100 ms; the receiver asked for 2 s.
    expect(rx.received[1]!.at - rx.received[0]!.at).toBeGreaterThanOrEqual(1900);
  });

  it('does not follow redirects: a 3xx is a failed attempt and the target is never contacted', async () => {
    const target = await receiver();
    const rx = await receiver(() => ({ status: 307, headers: { location: target.url } }));
    const w = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.unsubscribed'] });
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.unsubscribed' })]);
    await rx.waitFor((r) => r.length >= 1);
    const log = await eventually(async () => (await deliveriesOf(ctx, t.apiKey, w.id))[0]);
    expect(log).toMatchObject({ outcome: 'retrying', status_code: 307 });
    await sleep(300);
    expect(target.received).toHaveLength(0);
  });

  it('410 Gone disables the webhook at once; it gets nothing until PATCHed enabled:true', async () => {
    let gone = true;
    const rx = await receiver(() => ({ status: gone ? 410 : 200 }));
    const w = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.complained'] });
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.complained' })]);
    const off = await eventually(async () => {
      const r = (await call(ctx.app, 'GET', `/v1/webhooks/${w.id}`, { key: t.apiKey })).json();
      return r.status === 'disabled' ? r : null;
    });
    expect(off).toMatchObject({ enabled: false, status: 'disabled' });
    expect(off.disabled_reason).toMatch(/410/);
    expect(rx.received).toHaveLength(1);
    expect(await queued(w.id)).toHaveLength(0);
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.complained' })]);
    await sleep(400);
    expect(rx.received).toHaveLength(1);

    gone = false;
    const on = await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: t.apiKey, body: { enabled: true } });
    expect(on.json()).toMatchObject({ enabled: true, status: 'active', disabled_reason: null });
    const later = await emit(ctx, [newEvent(t.tenantId, { type: 'message.complained' })]);
    await rx.waitFor((r) => r.length >= 2);
    expect(eventsOf(rx.received.slice(1)).map((e) => e.id)).toEqual([later[0]!.id]);
  });

  it('disables a webhook whose attempts have all failed for 5 days', async () => {
    const rx = await receiver(() => ({ status: 500 }));
    const w = await createWebhook(ctx, t.apiKey, { url: rx.url, events: ['message.deferred'] });
    // The failure run started almost 5 days ago (simulated).
    const started = new Date(Date.now() - 5 * 86_400_000 + 60_000).toISOString();
    await ctx.c.database.db.updateTable('webhooks').set({ failing_since: started }).where('id', '=', w.id).execute();
    await emit(ctx, [newEvent(t.tenantId, { type: 'message.deferred' })]);
    await rx.waitFor((r) => r.length >= 1);
    await sleep(300);
    expect((await webhookRow(w.id)).status).toBe('active'); // 4 days 23 h 59 min: not yet
    const older = new Date(Date.now() - 5 * 86_400_000 - 1000).toISOString();
    await ctx.c.database.db.updateTable('webhooks').set({ failing_since: older }).where('id', '=', w.id).execute();
    await rx.waitFor((r) => r.length >= 2, 5000);
    const row = await eventually(async () => {
      const r = await webhookRow(w.id);
      return r.status === 'disabled' ? r : null;
    });
    expect(row.enabled).toBe(0);
    expect(row.disabled_reason).toMatch(/5 days/);
    // A success ends a failure run: the timestamp is cleared.
    rx.respond = () => ({ status: 200 });
    await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: t.apiKey, body: { enabled: true } });
    expect((await webhookRow(w.id)).failing_since).toBeNull();
  });

  it('a slow endpoint never delays another webhook', async () => {
    const slow = await receiver(() => ({ status: 200, delayMs: 4000 }));
    const fast = await receiver();
    await createWebhook(ctx, t.apiKey, { url: slow.url, events: ['message.suppressed'] });
    await createWebhook(ctx, t.apiKey, { url: fast.url, events: ['message.suppressed'] });
    const started = Date.now();
    await emit(
      ctx,
      Array.from({ length: 40 }, () => newEvent(t.tenantId, { type: 'message.suppressed' })),
    );
    await fast.waitFor((r) => r.length >= 40, 3000);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(slow.received.length).toBeLessThanOrEqual(16); // its own concurrency bound
  }, 20_000);
});

describe('batch policy', () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await createTenant(ctx);
  });

  it('sends {"batch_id","events":[...]} bodies of at most batch_max_size events', async () => {
    const rx = await receiver();
    const w = await createWebhook(ctx, t.apiKey, {
      url: rx.url,
      dispatch_policy: 'batch',
      batch_max_size: 10,
      batch_max_wait_ms: 200,
    });
    const rows = await emit(
      ctx,
      Array.from({ length: 25 }, () => newEvent(t.tenantId)),
    );
    await rx.waitFor((r) => eventsOf(r).length >= 25);
    for (const rec of rx.received) {
      const body = verify(w.secret, rec) as { batch_id: string; events: unknown[] };
      expect(Object.keys(body).sort()).toEqual(['batch_id', 'events']);
      expect(rec.headers['webhook-id']).toBe(body.batch_id);
      expect(body.events.length).toBeLessThanOrEqual(10);
    }
    expect(new Set(eventsOf(rx.received).map((e) => e.id))).toEqual(new Set(rows.map((r) => r.id)));
    expect(rx.received.length).toBeGreaterThanOrEqual(3);
  });

  it('flushes a partial batch after batch_max_wait_ms', async () => {
    const rx = await receiver();
    await createWebhook(ctx, t.apiKey, {
      url: rx.url,
      dispatch_policy: 'batch',
      batch_max_size: 100,
      batch_max_wait_ms: 700,
      events: ['message.bounced'],
    });
    await sleep(50);
    const started = Date.now();
    await emit(
      ctx,
      Array.from({ length: 3 }, () => newEvent(t.tenantId, { type: 'message.bounced' })),
    );
    await rx.waitFor((r) => r.length >= 1, 5000);
    const waited = rx.received[0]!.at - started;
    expect(waited).toBeGreaterThanOrEqual(650);
    expect(waited).toBeLessThan(2500);
    expect(eventsOf(rx.received)).toHaveLength(3);
  });

  it('retries a failed batch with its events', async () => {
    const rx = await receiver((r) => (r.n === 1 ? { status: 500 } : { status: 200 }));
    await createWebhook(ctx, t.apiKey, {
      url: rx.url,
      dispatch_policy: 'batch',
      batch_max_size: 50,
      batch_max_wait_ms: 0,
      events: ['message.failed'],
    });
    const rows = await emit(
      ctx,
      Array.from({ length: 5 }, () => newEvent(t.tenantId, { type: 'message.failed' })),
    );
    await rx.waitFor((r) => eventsOf(r.slice(1)).length >= 5, 10_000);
    const retried = new Set(eventsOf(rx.received.slice(1)).map((e) => e.id));
    expect(retried).toEqual(new Set(rows.map((r) => r.id)));
  });
});

describe('policy changes', () => {
  it('events queued as a batch are delivered one by one after a PATCH to the single policy', async () => {
    const t = await createTenant(ctx);
    const rx = await receiver();
    const w = await createWebhook(ctx, t.apiKey, {
      url: rx.url,
      dispatch_policy: 'batch',
      batch_max_size: 100,
      batch_max_wait_ms: 60_000,
      events: ['message.accepted'],
    });
    const rows = await emit(
      ctx,
      Array.from({ length: 5 }, () => newEvent(t.tenantId)),
    );
    await eventually(async () => (await queued(w.id)).length > 0, 5000, 'fanned out');
    await sleep(200);
    expect(rx.received).toHaveLength(0); // waiting for the batch to fill
    await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: t.apiKey, body: { dispatch_policy: 'single' } });
    await rx.waitFor((r) => r.length >= 5);
    expect(rx.received.every((r) => !r.body.startsWith('{"batch_id"'))).toBe(true);
    expect(new Set(rx.received.map((r) => r.headers['webhook-id']))).toEqual(new Set(rows.map((r) => r.id)));
    await eventually(async () => (await queued(w.id)).length === 0, 5000, 'queue drained');
  });
});

describe('graceful stop', () => {
  it('finishes in-flight POSTs and records them before stop() resolves', async () => {
    const c2 = await createTestContext();
    const t = await createTenant(c2);
    const rx = await receiver(() => ({ status: 200, delayMs: 800 }));
    const d = startDispatcher(c2, FAST, 'stopping-node');
    try {
      const w = await createWebhook(c2, t.apiKey, { url: rx.url });
      await emit(c2, [newEvent(t.tenantId)]);
      await rx.waitFor((r) => r.length >= 1);
      await d.stop();
      const rows = await c2.c.database.db
        .selectFrom('webhook_queue')
        .selectAll()
        .where('webhook_id', '=', w.id)
        .execute();
      expect(rows).toHaveLength(0);
      expect((await deliveriesOf(c2, t.apiKey, w.id))[0]).toMatchObject({ outcome: 'delivered' });
    } finally {
      await d.stop();
      await c2.close();
    }
  });
});
