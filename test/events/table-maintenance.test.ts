import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { autovacuumOn, maintainTables, tableThresholds } from '../../src/db/table-maintenance.ts';
import { insertEvents } from '../../src/modules/events/events.repo.ts';
import type { NewEvent } from '../../src/modules/events/events.types.ts';
import { isoAt } from '../../src/lib/clock.ts';
import { createTenant, createTestContext, DIALECT, type TestContext } from '../helpers/context.ts';

/**
 * With autovacuum off (this project's CI PostgreSQL), a day's events partition kept the
 * statistics of its empty start, and the newest-page query of GET /v1/events read and sorted the
 * whole day: 182 ms at 86,000 events in the PostgreSQL soak. src/db/table-maintenance.ts
 * analyzes (and vacuums) our tables as autovacuum would.
 */
describe.runIf(DIALECT === 'postgres')('table maintenance (PostgreSQL)', () => {
  let ctx: TestContext;
  let tenantId: string;
  beforeAll(async () => {
    ctx = await createTestContext();
    tenantId = (await createTenant(ctx)).tenantId;
    // Statistics of the empty partitions first, as a fresh install has them.
    await sql`analyze`.execute(ctx.c.database.db);
    const events: NewEvent[] = Array.from({ length: 20_000 }, (_, i) => ({
      tenantId,
      type: 'message.delivered',
      transmissionId: null,
      messageId: null,
      recipient: `r${i}@example.com`,
      mailType: 'transactional',
      tags: [],
      metadata: {},
      data: {},
    }));
    for (let i = 0; i < events.length; i += 2_000) await insertEvents(ctx.c.database.db, events.slice(i, i + 2_000));
    // A backend reports its row counts to the statistics collector when idle, up to 10 s later.
    for (let waited = 0; (await changedEventRows()) < events.length; waited += 250) {
      if (waited > 30_000) throw new Error('the inserted rows never showed in pg_stat_user_tables');
      await new Promise((r) => setTimeout(r, 250));
    }
  }, 120_000);
  afterAll(async () => {
    await ctx?.close();
  });

  async function changedEventRows(): Promise<number> {
    const { rows } = await sql<{ n: number | string }>`select coalesce(sum(n_mod_since_analyze), 0) as n
      from pg_stat_user_tables where schemaname = current_schema() and relname like 'events_p%'`.execute(
      ctx.c.database.db,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** A Sort node of a plan (a Merge Append's "Sort Key" line is not one: it merges index order). */
  const SORT_NODE = /(^|->)\s*Sort\s+\(cost/m;

  /** The plan of the newest-page query over the last 7 days (as listEvents sends it). */
  async function newestPagePlan(): Promise<string> {
    const from = isoAt(Date.now() - 7 * 86_400_000);
    const { rows } = await sql<{ 'QUERY PLAN': string }>`explain select * from events
      where tenant_id = ${tenantId} and id >= ${'0'} and created_at >= ${from} order by id desc limit 50`.execute(
      ctx.c.database.db,
    );
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  }

  it('analyzes the filled partition; the newest page then reads the index backwards instead of sorting the day', async () => {
    const off = !(await autovacuumOn(ctx.c.database));
    // Only with autovacuum off can the stale plan be shown reliably (autovacuum may refresh it).
    if (off) expect(await newestPagePlan()).toMatch(SORT_NODE);
    const done = await maintainTables(ctx.c.database, 'test-holder', ctx.c.logger, { force: true });
    const touched = [...done.analyzed, ...done.vacuumed];
    expect(touched.some((t) => t.startsWith('events_p'))).toBe(true);
    const plan = await newestPagePlan();
    expect(plan).toMatch(/Index Scan Backward/);
    expect(plan).not.toMatch(SORT_NODE);
    // Nothing left to do right after a pass.
    const again = await maintainTables(ctx.c.database, 'test-holder', ctx.c.logger, { force: true });
    expect(again.analyzed.filter((t) => t.startsWith('events_p'))).toEqual([]);
  });

  it('runs on one node at a time: another holder gets nothing while the lease is held', async () => {
    const other = await maintainTables(ctx.c.database, 'other-holder', ctx.c.logger, { force: true });
    expect(other).toEqual({ analyzed: [], vacuumed: [] });
  });

  // Issue 31 item 8: every claimed message leaves a dead entry where the claims start reading
  // (migration 022); under the server's default 50 + 20 % the dead rows allowed between two
  // vacuums grew with the table of finished messages.
  it('gives messages its own vacuum threshold, 1,000 + 2 % of its rows, and follows it with autovacuum off', async () => {
    const db = ctx.c.database.db;
    const { rows: opts } = await sql<{ options: string[] | null }>`select reloptions as options from pg_class
      where oid = to_regclass('messages')`.execute(db);
    expect(opts[0]?.options).toEqual(
      expect.arrayContaining(['autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_scale_factor=0.02']),
    );
    await sql`insert into messages (tenant_id, id, transmission_id, recipient, recipient_domain, state,
        next_attempt_at, created_at, updated_at)
      select ${tenantId}, 'vac-' || lpad(i::text, 6, '0'), 'vac-tx', 'r' || i || '@example.com', 'example.com',
        'delivered', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
      from generate_series(1, 20000) i`.execute(db);
    await sql`vacuum (analyze) messages`.execute(db);
    // 1,800 dead rows: over 1,000 + 2 % of 20,000 (1,400), under the server's 50 + 20 % (4,050).
    await sql`update messages set updated_at = '2026-01-02T00:00:00.000Z' where id <= 'vac-001800' and id like 'vac-%'`.execute(
      db,
    );
    for (let waited = 0; ; waited += 250) {
      const { rows } = await sql<{ dead: number | string }>`select n_dead_tup as dead from pg_stat_user_tables
        where relid = to_regclass('messages')`.execute(db);
      if (Number(rows[0]?.dead ?? 0) >= 1800) break;
      if (waited > 30_000) throw new Error('the dead rows never showed in pg_stat_user_tables');
      await new Promise((r) => setTimeout(r, 250));
    }
    const done = await maintainTables(ctx.c.database, 'test-holder', ctx.c.logger, { force: true });
    expect(done.vacuumed).toContain('messages');
  });

  it("reads a table's thresholds from its storage parameters over the server's", () => {
    const server = { vacuumThreshold: 50, vacuumScaleFactor: 0.2, analyzeThreshold: 50, analyzeScaleFactor: 0.1 };
    expect(tableThresholds(server, null)).toEqual(server);
    expect(
      tableThresholds(server, [
        'fillfactor=90',
        'autovacuum_vacuum_threshold=1000',
        'autovacuum_vacuum_scale_factor=0.02',
        'autovacuum_analyze_scale_factor=bad',
      ]),
    ).toEqual({ ...server, vacuumThreshold: 1000, vacuumScaleFactor: 0.02 });
  });
});
