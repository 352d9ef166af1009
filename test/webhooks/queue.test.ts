/**
 * The dispatcher's queue statements (src/modules/webhooks/queue.repo.ts, queue.sql.ts) on the
 * test backend: fan-out bodies, leases, releases. The dispatcher's own behaviour is in
 * dispatch.test.ts; these pin down the rows it relies on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isoAt } from '../../src/lib/clock.ts';
import { eventJson } from '../../src/modules/events/events.repo.ts';
import {
  claimUnits,
  fanOut,
  loadEvents,
  releaseClaims,
  releaseUnits,
  SINGLE_UNIT_EVENTS,
} from '../../src/modules/webhooks/queue.repo.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { emit, newEvent } from './helpers.ts';

let ctx: TestContext;
let t: TestTenant;
const W = '0193a4f0-0000-7000-8000-00000000aaaa';

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

const db = () => ctx.c.database.db;
const rowsOf = (webhookId: string) =>
  db().selectFrom('webhook_queue').selectAll().where('webhook_id', '=', webhookId).orderBy('id').execute();

/** Fans out the whole outbox to webhook `id` alone; by default one event per unit. */
async function fanOutTo(id: string, now = Date.now(), policy: 'single' | 'batch' = 'batch', batchMaxSize = 1) {
  return fanOut(ctx.c.database, 1000, () => [{ id, policy, batchMaxSize }], isoAt(now), isoAt(now + 1000));
}

describe('fan-out', () => {
  it('hands over each routed event with the same JSON the events API would build', async () => {
    const tricky = newEvent(t.tenantId, {
      recipient: 'ä\u2028"q"@example.com',
      tags: ['ü"', 'a\\b'],
      metadata: { k: 'line\nbreak\u0001', n: '1' },
      data: { tls: true, attempt: 1, x: null, big: 1e21, small: 1.5e-7, s: '\ud83d\ude00' },
    });
    const [row] = await emit(ctx, [tricky]);
    const out = await fanOutTo('0193a4f0-0000-7000-8000-00000000bbbb');
    expect(out.claimed).toBe(1);
    expect(out.routed).toEqual([
      { id: row!.id, body: eventJson(row!), webhookIds: ['0193a4f0-0000-7000-8000-00000000bbbb'] },
    ]);
    // The same event read back by the lanes (cache miss path) serializes identically.
    const [loaded] = await loadEvents(ctx.c.database, [row!.id]);
    expect(eventJson(loaded!)).toBe(out.routed[0]!.body);
    expect(await db().selectFrom('webhook_outbox').selectAll().execute()).toEqual([]);
  });

  it('single policy: units of up to SINGLE_UNIT_EVENTS events (still one POST each)', async () => {
    const w = '0193a4f0-0000-7000-8000-00000000eeee';
    await emit(
      ctx,
      Array.from({ length: SINGLE_UNIT_EVENTS + 3 }, () => newEvent(t.tenantId)),
    );
    await fanOutTo(w, Date.now(), 'single', 100);
    expect((await rowsOf(w)).map((r) => r.event_count).sort((a, b) => a - b)).toEqual([3, SINGLE_UNIT_EVENTS]);
  });

  it('splices the stored JSON columns as they are: a malformed one cannot stop fan-out', async () => {
    const [row] = await emit(ctx, [newEvent(t.tenantId)]);
    await db().updateTable('events').set({ metadata: '{not json' }).where('id', '=', row!.id).execute();
    const out = await fanOutTo('0193a4f0-0000-7000-8000-00000000dddd');
    expect(out.claimed).toBe(1);
    expect(out.routed[0]!.body).toBe(eventJson({ ...row!, metadata: '{not json' }));
  });
});

describe('claims and leases', () => {
  it('a claim moves next_attempt_at to the end of the lease; an expired lease is claimable again', async () => {
    await emit(ctx, [newEvent(t.tenantId), newEvent(t.tenantId), newEvent(t.tenantId)]);
    const t0 = Date.now();
    await fanOutTo(W, t0);
    const lease = { now: isoAt(t0), until: isoAt(t0 + 60_000), holder: 'node-a' };
    const first = await claimUnits(ctx.c.database, W, { limit: 2 }, lease);
    expect(first).toHaveLength(2);
    const held = (await rowsOf(W)).filter((r) => r.locked_by === 'node-a');
    expect(held.map((r) => r.next_attempt_at)).toEqual([lease.until, lease.until]);
    // Another node sees only the one unit left, and nothing of node-a's while its lease runs.
    const other = { now: isoAt(t0 + 1000), until: isoAt(t0 + 61_000), holder: 'node-b' };
    expect(await claimUnits(ctx.c.database, W, { limit: 10 }, other)).toHaveLength(1);
    expect(await claimUnits(ctx.c.database, W, { limit: 10 }, other)).toHaveLength(0);
    expect(await claimUnits(ctx.c.database, W, { ids: first.map((u) => u.id) }, other)).toHaveLength(0);
    // node-a dies: once its lease is over, its units are due and claimable by id or by age.
    const later = { now: isoAt(t0 + 60_001), until: isoAt(t0 + 120_000), holder: 'node-b' };
    const taken = await claimUnits(ctx.c.database, W, { limit: 10 }, later);
    expect(taken.map((u) => u.id).sort()).toEqual(first.map((u) => u.id).sort());
    expect(taken.every((u) => u.attempts === 0)).toBe(true);
  });

  it('releaseUnits gives back only the holder’s units, due at once, with no attempt counted', async () => {
    const w = '0193a4f0-0000-7000-8000-00000000cccc';
    await emit(ctx, [newEvent(t.tenantId), newEvent(t.tenantId)]);
    const t0 = Date.now();
    await fanOutTo(w, t0);
    const lease = { now: isoAt(t0), until: isoAt(t0 + 60_000), holder: 'node-a' };
    const claimed = await claimUnits(ctx.c.database, w, { limit: 10 }, lease);
    expect(claimed).toHaveLength(2);
    await releaseUnits(ctx.c.database, w, 'node-b', [claimed[0]!.id], isoAt(t0 + 10)); // not its holder
    expect((await rowsOf(w)).every((r) => r.locked_by === 'node-a')).toBe(true);
    await releaseUnits(ctx.c.database, w, 'node-a', [claimed[0]!.id], isoAt(t0 + 10));
    const rows = await rowsOf(w);
    const released = rows.find((r) => r.id === claimed[0]!.id);
    expect(released).toMatchObject({
      locked_by: null,
      locked_until: null,
      attempts: 0,
      next_attempt_at: isoAt(t0 + 10),
    });
    const again = await claimUnits(
      ctx.c.database,
      w,
      { limit: 10 },
      { ...lease, holder: 'node-b', now: isoAt(t0 + 20) },
    );
    expect(again.map((u) => u.id)).toEqual([claimed[0]!.id]);
    // A graceful stop gives back everything the node still holds.
    await releaseClaims(db(), 'node-a', isoAt(t0 + 30));
    expect((await rowsOf(w)).find((r) => r.id === claimed[1]!.id)).toMatchObject({ locked_by: null, attempts: 0 });
  });
});
