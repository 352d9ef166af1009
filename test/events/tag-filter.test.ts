/**
 * GET /v1/events?tag= over several days (src/modules/events/events.query.ts). On PostgreSQL a tag
 * is looked up in event_tags first and its events fetched by id within the days of those ids
 * (listTagged), never as a join that plans and probes every day partition; with other filters
 * (type, recipient) the tag rows are read in growing batches until the page is full. Both
 * backends must page through exactly the matching events, newest first, including events whose
 * created_at is read up to a few seconds before their id was minted.
 */
import { CompiledQuery, type KyselyPlugin, type RootOperationNode } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId } from '../../src/lib/ids.ts';
import { uuidFloor } from '../../src/lib/ids.ts';
import { listEvents } from '../../src/modules/events/events.query.ts';
import { createDay } from '../../src/db/event-partitions.ts';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';

const DAY = 86_400_000;
let ctx: TestContext;
let t: TestTenant;
const now = Date.now();
const today = Math.floor(now / DAY) * DAY;
const days = [today - 12 * DAY, today - 9 * DAY, today - 2 * DAY];
/** Every event written, newest first. */
const written: { id: string; type: string; created_at: string; tags: string[] }[] = [];

const raw = async <R>(text: string, params: unknown[] = []) =>
  (await ctx.c.database.db.executeQuery<R>(CompiledQuery.raw(text, params))).rows;

/** An event whose id carries time `ms` and whose created_at is `lagMs` earlier, as insertEvents writes them. */
async function eventAt(ms: number, type: string, tags: string[], lagMs = 0): Promise<void> {
  const id = uuidFloor(ms).slice(0, 13) + newId().slice(13);
  const created = new Date(ms - lagMs).toISOString();
  const db = ctx.c.database.db;
  await db
    .insertInto('events')
    .values({
      tenant_id: t.tenantId,
      id,
      type,
      created_at: created,
      transmission_id: null,
      message_id: null,
      recipient: 'a@example.com',
      mail_type: null,
      tags: JSON.stringify(tags),
      metadata: '{}',
      data: '{}',
    })
    .execute();
  for (const tag of tags)
    await db.insertInto('event_tags').values({ tenant_id: t.tenantId, tag, event_id: id }).execute();
  written.push({ id, type, created_at: created, tags });
}

async function pages(query: Record<string, string>, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 100; i++) {
    const res = await call(ctx.app, 'GET', '/v1/events', {
      key: t.apiKey,
      query: { ...query, limit: String(limit), ...(cursor ? { cursor } : {}) },
    });
    expect(res.statusCode, res.body).toBe(200);
    const page = res.json() as { data: { id: string }[]; next_cursor: string | null };
    ids.push(...page.data.map((e) => e.id));
    if (!page.next_cursor) return ids;
    cursor = page.next_cursor;
  }
  throw new Error('too many pages');
}

const expected = (keep: (e: (typeof written)[number]) => boolean) =>
  written
    .filter(keep)
    .map((e) => e.id)
    .sort()
    .reverse();

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  if (DIALECT === 'postgres') for (const d of days) await createDay(ctx.c.database.db, d);
  // 'bulk' on 40 events a day, of which every 13th is delivered; 'rare' on 3 events, all old.
  for (const d of days) {
    for (let i = 0; i < 40; i++) {
      await eventAt(d + 3_600_000 + i * 1000, i % 13 === 5 ? 'message.delivered' : 'message.accepted', ['bulk']);
    }
  }
  await eventAt(days[0]! + 7_200_000, 'message.opened', ['rare']);
  await eventAt(days[0]! + 7_300_000, 'message.accepted', ['rare', 'bulk']);
  // Just after midnight, created_at read 30 s before the id was minted: the event is stored in
  // the previous day's partition, and its tag row in the id's day.
  await eventAt(days[1]! + 10_000, 'message.delivered', ['rare', 'bulk'], 30_000);
  await eventAt(today - 5 * DAY, 'message.accepted', ['other']);
  // Within the last day: a page of these comes from the newest day's tag rows alone.
  for (let i = 0; i < 5; i++) await eventAt(now - 3_600_000 + i * 1000, 'message.accepted', ['fresh', 'bulk']);
});
afterAll(async () => {
  await ctx?.close();
});

it('pages through exactly the events of a tag, alone and with a type that drops most of its rows', async () => {
  expect(await pages({ tag: 'bulk' }, 7)).toEqual(expected((e) => e.tags.includes('bulk')));
  expect(await pages({ tag: 'rare' }, 2)).toEqual(expected((e) => e.tags.includes('rare')));
  expect(await pages({ tag: 'fresh' }, 2)).toEqual(expected((e) => e.tags.includes('fresh')));
  // 10 delivered among 127 'bulk' rows: listTagged reads several batches of tag rows per page.
  const delivered = expected((e) => e.tags.includes('bulk') && e.type === 'message.delivered');
  expect(delivered).toHaveLength(10);
  expect(await pages({ tag: 'bulk', type: 'message.delivered' }, 3)).toEqual(delivered);
  expect(await pages({ tag: 'bulk', type: 'message.delivered,message.opened' }, 50)).toEqual(delivered);
  expect(await pages({ tag: 'rare', type: 'message.opened' }, 50)).toEqual(
    expected((e) => e.tags.includes('rare') && e.type === 'message.opened'),
  );
  expect(await pages({ tag: 'none' }, 50)).toEqual([]);
  // A window and a tag.
  const from = new Date(days[1]! - 60_000).toISOString();
  const to = new Date(days[2]!).toISOString();
  expect(await pages({ tag: 'bulk', from, to }, 9)).toEqual(
    expected((e) => e.tags.includes('bulk') && e.created_at >= from && e.created_at < to),
  );
});

it.skipIf(DIALECT !== 'postgres')(
  "a tag page's statements read the events partitions of its own days only, never every day",
  async () => {
    const nodes: RootOperationNode[] = [];
    const capture: KyselyPlugin = {
      transformQuery: (args) => {
        nodes.push(args.node);
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    const db = ctx.c.database.db.withPlugin(capture);
    const rows = await listEvents(db, t.tenantId, { limit: 50, types: [], tag: 'rare' });
    expect(rows.map((r) => r.id)).toEqual(expected((e) => e.tags.includes('rare')));
    const read = new Set<string>();
    for (const node of nodes) {
      const q = db.getExecutor().compileQuery(node, { queryId: '' } as never);
      const plan = await raw<{ 'QUERY PLAN': string }>(`explain (costs off) ${q.sql}`, [...q.parameters]);
      for (const m of plan
        .map((r) => r['QUERY PLAN'])
        .join('\n')
        .match(/\bevents_(p\d{8}|default)\b/g) ?? []) {
        read.add(m);
      }
    }
    // The 'rare' events lie on days[0] and just before days[1] (the previous day's partition).
    const name = (ms: number) => `events_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;
    // The days between them have no partition in the test database, so the default one (where
    // their events would be) stays in the plan too.
    const allowed = new Set([name(days[0]!), name(days[1]! - DAY), name(days[1]!), 'events_default']);
    expect([...read].filter((p) => !allowed.has(p))).toEqual([]);
    expect(read.size).toBeGreaterThan(0);
  },
);
