/** GET /v1/events (docs/api.md "GET /v1/events"): filters, newest-first keyset pages, validation, retention. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/lib/ids.ts';
import { runEventRetention } from '../../src/modules/events/events.retention.ts';
import { uuidFloor } from '../../src/lib/ids.ts';
import type { EventView } from '../../src/modules/events/events.types.ts';
import {
  call,
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';
import { checkLimitParameter, checkTamperedCursor, walkPages } from '../foundation/paging.ts';
import { emit, newEvent } from '../webhooks/helpers.ts';

let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;
const T1 = newId();
const T2 = newId();
const M1 = newId();
let all: { id: string; created_at: string }[] = [];

async function list(
  query: Record<string, string>,
  key = a.apiKey,
): Promise<{ data: EventView[]; next_cursor: string | null }> {
  const res = await call(ctx.app, 'GET', '/v1/events', { key, query: { limit: '1000', ...query } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

beforeAll(async () => {
  ctx = await createTestContext();
  a = await createTenant(ctx);
  b = await createTenant(ctx);
  // 30 events of tenant A in three insert batches (three created_at values), some of tenant B.
  for (let batch = 0; batch < 3; batch++) {
    const rows = await emit(
      ctx,
      Array.from({ length: 10 }, (_, i) =>
        newEvent(a.tenantId, {
          type: (['message.accepted', 'message.delivered', 'message.bounced'] as const)[i % 3],
          transmissionId: i < 5 ? T1 : T2,
          messageId: i === 0 && batch === 0 ? M1 : newId(),
          recipient: i % 2 ? 'odd@Example.com'.replace('Example', 'example') : `r${batch}${i}@example.com`,
          tags: i % 4 === 0 ? ['welcome', '50%_off "x"'] : i % 4 === 1 ? ['nov'] : [],
        }),
      ),
    );
    all.push(...rows);
    await new Promise((r) => setTimeout(r, 15));
  }
  all = all.sort((x, y) => (x.id < y.id ? 1 : -1));
  await emit(ctx, [newEvent(b.tenantId, { tags: ['welcome'], transmissionId: T1 }), newEvent(b.tenantId)]);
});
afterAll(async () => {
  await ctx?.close();
});

describe('GET /v1/events', () => {
  it("lists the tenant's events newest first, in the public event shape", async () => {
    const page = await list({});
    expect(page.data.map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect(page.next_cursor).toBeNull();
    const e = page.data[0]!;
    expect(Object.keys(e).sort()).toEqual(
      [
        'created_at',
        'data',
        'id',
        'mail_type',
        'message_id',
        'metadata',
        'recipient',
        'tags',
        'tenant_id',
        'transmission_id',
        'type',
      ].sort(),
    );
    expect(e.tenant_id).toBe(a.tenantId);
  });

  it('pages with keyset cursors, stable while new events arrive', async () => {
    let extra = 0;
    const { ids } = await walkPages(ctx, '/v1/events', a.apiKey, 7, async () => {
      // Newer events inserted between pages never shift the pages being walked.
      await emit(ctx, [newEvent(a.tenantId, { type: 'message.opened' })]);
      extra++;
    });
    expect(ids).toEqual(all.map((e) => e.id));
    expect(extra).toBeGreaterThan(1);
    const fresh = await list({ type: 'message.opened' });
    expect(fresh.data).toHaveLength(extra);
  });

  it('filters by one or several types', async () => {
    const one = await list({ type: 'message.delivered' });
    expect(one.data.length).toBe(9);
    expect(one.data.every((e) => e.type === 'message.delivered')).toBe(true);
    const two = await list({ type: 'message.delivered, message.bounced' });
    expect(two.data.length).toBe(18);
    expect(two.data.map((e) => e.id)).toEqual([...two.data.map((e) => e.id)].sort().reverse());
    // Several types page correctly too.
    const { ids } = await walkPages(ctx, '/v1/events?type=message.delivered,message.bounced', a.apiKey, 5);
    expect(ids).toEqual(two.data.map((e) => e.id));
  });

  it('filters by recipient (domain case-insensitive), transmission_id, message_id and tag; filters combine', async () => {
    expect((await list({ recipient: 'odd@EXAMPLE.COM' })).data).toHaveLength(15);
    expect((await list({ transmission_id: T1 })).data).toHaveLength(15);
    expect((await list({ transmission_id: T1 }, b.apiKey)).data).toHaveLength(1);
    expect((await list({ message_id: M1 })).data.map((e) => e.message_id)).toEqual([M1]);
    const welcome = await list({ tag: 'welcome' });
    expect(welcome.data).toHaveLength(9);
    expect(welcome.data.every((e) => e.tags.includes('welcome'))).toBe(true);
    // A tag with LIKE and JSON metacharacters matches exactly, never as a pattern.
    expect((await list({ tag: '50%_off "x"' })).data).toHaveLength(9);
    expect((await list({ tag: '50%' })).data).toHaveLength(0);
    expect((await list({ tag: '%' })).data).toHaveLength(0);
    expect(
      (await list({ tag: 'nov', type: 'message.delivered' })).data.every(
        (e) => e.type === 'message.delivered' && e.tags.includes('nov'),
      ),
    ).toBe(true);
    const combo = await list({
      transmission_id: T2,
      type: 'message.accepted,message.bounced',
      recipient: 'odd@example.com',
    });
    expect(combo.data.length).toBeGreaterThan(0);
    expect(
      combo.data.every(
        (e) => e.transmission_id === T2 && e.recipient === 'odd@example.com' && e.type !== 'message.delivered',
      ),
    ).toBe(true);
    const { ids } = await walkPages(ctx, '/v1/events?tag=welcome', a.apiKey, 2);
    expect(ids).toEqual(welcome.data.map((e) => e.id));
  });

  it('filters by time: from inclusive, to exclusive', async () => {
    const times = [...new Set(all.map((e) => e.created_at))].sort();
    expect(times).toHaveLength(3);
    const [t0, t1, t2] = times as [string, string, string];
    expect((await list({ from: t1 })).data.every((e) => e.created_at >= t1)).toBe(true);
    expect((await list({ from: t1, type: 'message.accepted,message.bounced,message.delivered' })).data).toHaveLength(
      20,
    );
    expect((await list({ to: t1 })).data.map((e) => e.created_at)).toEqual(Array(10).fill(t0));
    expect((await list({ from: t1, to: t2 })).data).toHaveLength(10);
    expect((await list({ from: t1, to: t2, tag: 'welcome' })).data).toHaveLength(3);
    expect((await list({ from: '2000-01-01', to: '2000-01-02T00:00:00+02:00' })).data).toHaveLength(0);
    expect((await list({ from: '2000-01-01T00:00:00Z' })).data.length).toBeGreaterThanOrEqual(30);
  });

  it('answers 400 invalid_parameter naming the field for bad parameters', async () => {
    const bad: [Record<string, string>, string][] = [
      [{ type: 'message.nope' }, 'type'],
      [{ type: 'message.accepted,' }, 'type'],
      [{ transmission_id: 'abc' }, 'transmission_id'],
      [{ message_id: '123' }, 'message_id'],
      [{ from: 'yesterday' }, 'from'],
      [{ from: '2026-11-22T10:00:00' }, 'from'], // no zone
      [{ to: '2026-13-45T00:00:00Z' }, 'to'],
      [{ from: '2026-11-23T00:00:00Z', to: '2026-11-22T00:00:00Z' }, 'from'],
      [{ tag: 'x'.repeat(65) }, 'tag'],
      [{ sort: 'asc' }, 'sort'],
    ];
    for (const [query, field] of bad) {
      const res = await call(ctx.app, 'GET', '/v1/events', { key: a.apiKey, query });
      const body = expectError(res, 400, 'invalid_parameter');
      expect((body.errors[0] as { field?: string }).field, JSON.stringify(query)).toBe(field);
    }
    await checkLimitParameter(ctx, '/v1/events', a.apiKey);
    const first = await call(ctx.app, 'GET', '/v1/events', { key: a.apiKey, query: { limit: '2' } });
    await checkTamperedCursor(ctx, '/v1/events', a.apiKey, first.json().next_cursor);
  });

  it("never shows another tenant's events, and needs read:events", async () => {
    const other = await list({}, b.apiKey);
    expect(other.data).toHaveLength(2);
    expect(other.data.every((e) => e.tenant_id === b.tenantId)).toBe(true);
    expect((await list({ message_id: M1 }, b.apiKey)).data).toHaveLength(0);
    const key = await keyWithScopes(ctx, a.tenantId, ['send:transmissions', 'manage:webhooks']);
    const res = await call(ctx.app, 'GET', '/v1/events', { key });
    expect(expectError(res, 403, 'insufficient_scope').errors[0]?.message).toContain('read:events');
    const reader = await keyWithScopes(ctx, a.tenantId, ['read:events']);
    expect((await call(ctx.app, 'GET', '/v1/events', { key: reader })).statusCode).toBe(200);
  });

  it('uuidFloor bounds UUIDv7 ids by time', () => {
    const id = newId();
    const ms = Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(uuidFloor(ms) <= id).toBe(true);
    expect(uuidFloor(ms + 1) > id).toBe(true);
  });
});

describe('retention', () => {
  it('deletes old events and their tags, keeps those a webhook still has to deliver, under a lease', async () => {
    const t = await createTenant(ctx);
    const db = ctx.c.database.db;
    const rows = await emit(
      ctx,
      Array.from({ length: 6 }, () => newEvent(t.tenantId, { tags: ['old'] })),
    );
    // An event written at `iso`: its created_at, and its UUIDv7 id's time prefix with it (ids are
    // minted right after created_at is read; retention walks the id range: migration 016).
    const backdate = async (list: string[], iso: string) => {
      const out: string[] = [];
      for (const id of list) {
        const moved = uuidFloor(Date.parse(iso)).slice(0, 13) + id.slice(13);
        await db.updateTable('events').set({ id: moved, created_at: iso }).where('id', '=', id).execute();
        await db.updateTable('event_tags').set({ event_id: moved }).where('event_id', '=', id).execute();
        await db.updateTable('webhook_outbox').set({ event_id: moved }).where('event_id', '=', id).execute();
        out.push(moved);
      }
      return out;
    };
    const old = new Date(Date.now() - 31 * 86_400_000).toISOString();
    let ids = await backdate(
      rows.map((r) => r.id),
      old,
    );
    // ids[0] still waits for fan-out; ids[4] is queued for a webhook, which keeps it and every
    // later event of the tenant (ids[5]); ids[1..3] are done.
    await db.deleteFrom('webhook_outbox').where('event_id', 'in', ids.slice(1)).execute();
    const older = new Date(Date.now() - 32 * 86_400_000).toISOString();
    ids = [...(await backdate(ids.slice(0, 4), older)), ...ids.slice(4)];
    const unitId = newId();
    await db
      .insertInto('webhook_queue')
      .values({
        webhook_id: newId(),
        id: unitId,
        tenant_id: t.tenantId,
        event_ids: JSON.stringify([ids[4]]),
        event_count: 1,
        oldest_event_at: old,
        attempts: 2,
        next_attempt_at: old,
        locked_until: null,
        locked_by: null,
        created_at: old,
      })
      .execute();
    await db
      .insertInto('webhook_deliveries')
      .values({
        tenant_id: t.tenantId,
        id: newId(),
        webhook_id: newId(),
        created_at: old,
        batch_id: null,
        event_ids: '[]',
        attempt: 1,
        outcome: 'delivered',
        status_code: 200,
        duration_ms: 1,
        error: null,
        next_attempt_at: null,
        test: 0,
      })
      .execute();
    const fresh = await emit(ctx, [newEvent(t.tenantId, { tags: ['old'] })]);

    // Another node holds the lease: nothing happens.
    await db
      .insertInto('leases')
      .values({
        name: 'event-retention',
        holder: 'other-node',
        locked_until: new Date(Date.now() + 60_000).toISOString(),
      })
      .execute();
    await runEventRetention(ctx.c, 'this-node');
    expect(await db.selectFrom('events').select('id').where('tenant_id', '=', t.tenantId).execute()).toHaveLength(7);
    await db.deleteFrom('leases').where('name', '=', 'event-retention').execute();

    await runEventRetention(ctx.c, 'this-node');
    const kept = [ids[0]!, ids[4]!, ids[5]!, fresh[0]!.id].sort();
    const left = await db.selectFrom('events').select('id').where('tenant_id', '=', t.tenantId).execute();
    expect(left.map((r) => r.id).sort()).toEqual(kept);
    const tags = await db.selectFrom('event_tags').select('event_id').where('tenant_id', '=', t.tenantId).execute();
    expect(tags.map((r) => r.event_id).sort()).toEqual(kept);
    expect(
      await db.selectFrom('webhook_deliveries').select('id').where('tenant_id', '=', t.tenantId).execute(),
    ).toHaveLength(0);

    // Once delivered (outbox and queue rows gone), the next run removes them too.
    await db.deleteFrom('webhook_outbox').where('event_id', '=', ids[0]!).execute();
    await db.deleteFrom('webhook_queue').where('id', '=', unitId).execute();
    const r = await ctx.c.events.purgeExpired(30);
    expect(r.events).toBe(3);
  });
});
