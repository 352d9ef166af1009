/**
 * Daily event partitions on PostgreSQL (migration 017, src/db/event-partitions.ts): the
 * scheduler's job creates the days ahead and moves rows that fell into the default partition
 * into their new day; retention drops whole expired days (events and their tags), keeps a day a
 * webhook still needs (its rows then go one by one, once delivered), and the events API's time
 * window reads only the days it covers. SQLite keeps one table (the retention test in
 * events-api.test.ts covers its row deletion).
 */
import { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId } from '../../src/lib/ids.ts';
import { uuidFloor } from '../../src/lib/ids.ts';
import { listEventsQuery } from '../../src/modules/events/events.query.ts';
import { createDay, ensurePartitions, listDayPartitions } from '../../src/db/event-partitions.ts';
import { createTenant, createTestContext, DIALECT, type TestContext, type TestTenant } from '../helpers/context.ts';

const DAY = 86_400_000;
let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

const raw = async <R>(text: string, params: unknown[] = []) =>
  (await ctx.c.database.db.executeQuery<R>(CompiledQuery.raw(text, params))).rows;

/** An event (with one tag) written at `ms`: id prefix and created_at agree, as in production. */
async function eventAt(ms: number): Promise<string> {
  const id = uuidFloor(ms).slice(0, 13) + newId().slice(13);
  await raw(
    `insert into events (tenant_id, id, type, created_at, tags, metadata, data) values ($1, $2, 'message.accepted', $3, '["x"]', '{}', '{}')`,
    [t.tenantId, id, new Date(ms).toISOString()],
  );
  await raw(`insert into event_tags (tenant_id, tag, event_id) values ($1, 'x', $2)`, [t.tenantId, id]);
  return id;
}
const partitionOf = async (id: string) =>
  (await raw<{ p: string }>(`select tableoid::regclass::text as p from events where id = $1`, [id]))[0]?.p;

it.skipIf(DIALECT !== 'postgres')(
  'days ahead are created; rows in the default partition move to their day',
  async () => {
    const now = Date.now();
    const today = Math.floor(now / DAY) * DAY;
    const days = await listDayPartitions(ctx.c.database.db);
    expect(days).toContain(today);
    expect(days).toContain(today + 3 * DAY);
    // Ten days ahead has no partition yet: its event waits in the default partition...
    const later = today + 10 * DAY + 5000;
    const id = await eventAt(later);
    expect(await partitionOf(id)).toBe('events_default');
    // ...until the scheduler reaches that day.
    expect(await ensurePartitions(ctx.c.database.db, later)).toBeGreaterThan(0);
    expect(await partitionOf(id)).toMatch(/^events_p\d{8}$/);
    const tag = await raw<{ p: string }>(`select tableoid::regclass::text as p from event_tags where event_id = $1`, [
      id,
    ]);
    expect(tag[0]?.p).toMatch(/^event_tags_p\d{8}$/);
  },
);

it.skipIf(DIALECT !== 'postgres')(
  'retention drops expired days whole, keeps a day a webhook still needs, and windows prune',
  async () => {
    const db = ctx.c.database.db;
    const now = Date.now();
    const d40 = Math.floor((now - 40 * DAY) / DAY) * DAY;
    const d35 = Math.floor((now - 35 * DAY) / DAY) * DAY;
    for (const d of [d40, d35]) await createDay(db, d);
    const gone = [await eventAt(d40 + 1000), await eventAt(d40 + 2000)];
    const waiting = await eventAt(d35 + 1000);
    const sibling = await eventAt(d35 + 2000);
    await raw('delete from webhook_outbox');
    await raw(`insert into webhook_outbox (event_id, tenant_id) values ($1, $2)`, [waiting, t.tenantId]);

    // A one-hour window 40 days ago reads that day's partition only.
    const q = listEventsQuery(db, t.tenantId, {
      limit: 10,
      types: [],
      from: new Date(d40).toISOString(),
      to: new Date(d40 + 3_600_000).toISOString(),
    }).compile();
    const plan = (await raw<{ 'QUERY PLAN': string }>(`explain (costs off) ${q.sql}`, [...q.parameters])).map(
      (r) => r['QUERY PLAN'],
    );
    expect(new Set(plan.join('\n').match(/events_p\d{8}/g))).toEqual(
      new Set([`events_p${new Date(d40).toISOString().slice(0, 10).replaceAll('-', '')}`]),
    );

    const res = await ctx.c.events.purgeExpired(30);
    expect(res.days).toEqual([new Date(d40).toISOString().slice(0, 10)]);
    expect(await listDayPartitions(db)).not.toContain(d40);
    expect(await raw(`select id from events where id = any($1)`, [gone])).toEqual([]);
    expect(await raw(`select event_id from event_tags where event_id = any($1)`, [gone])).toEqual([]);
    // The day with an event still waiting for fan-out stays; its delivered sibling goes row by row.
    expect(await listDayPartitions(db)).toContain(d35);
    const left = await raw<{ id: string }>(`select id from events where id = any($1)`, [[waiting, sibling]]);
    expect(left.map((r) => r.id)).toEqual([waiting]);
  },
);
