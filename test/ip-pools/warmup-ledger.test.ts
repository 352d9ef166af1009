import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WarmupLedger } from '../../src/modules/warmup/ledger.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';

/**
 * Warmup slots are counted in the database, so a cap holds for two nodes sending from one
 * address at once (two containers on one database, each with its own connections).
 */
let node1: TestContext;
let node2: TestContext;

beforeAll(async () => {
  node1 = await createTestContext();
  node2 = await createTestContext({ shareWith: node1 });
});
afterAll(async () => {
  await node2?.close();
  await node1?.close();
});

const policy = (daily: number, hourly: number | null = null) => ({
  id: 'p',
  stages: [{ day: 1, daily_limit: daily, hourly_limit: hourly }],
  maxBounceRate: 0.05,
  maxComplaintRate: 0.001,
});

describe('warmup ledger', () => {
  it('two nodes racing for 40 slots of a daily limit of 10 get exactly 10', async () => {
    const clock = { now: () => Date.parse('2026-11-26T10:00:00Z') };
    const a = new WarmupLedger(node1.c.database.db, clock);
    const b = new WarmupLedger(node2.c.database.db, clock);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).reserve('192.0.2.1', policy(10))),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(10);
    const refused = results.find((r) => !r.ok);
    // Refused until the next UTC day.
    expect(refused).toEqual({ ok: false, retryAtMs: Date.parse('2026-11-27T00:00:00Z') });
    const row = await node1.c.database.db
      .selectFrom('warmup_counters')
      .selectAll()
      .where('address', '=', '192.0.2.1')
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ period: 'd:2026-11-26', sent: 10 });
  });

  it('an hourly limit refuses within the hour and gives the daily slot back', async () => {
    let now = Date.parse('2026-11-26T10:59:00Z');
    const ledger = new WarmupLedger(node1.c.database.db, { now: () => now });
    const p = policy(5, 2);
    const first = await Promise.all([1, 2, 3].map(() => ledger.reserve('192.0.2.2', p)));
    expect(first.filter((r) => r.ok)).toHaveLength(2);
    expect(first.find((r) => !r.ok)).toEqual({ ok: false, retryAtMs: Date.parse('2026-11-26T11:00:00Z') });
    now = Date.parse('2026-11-26T11:00:00Z');
    const second = await Promise.all([1, 2, 3].map(() => ledger.reserve('192.0.2.2', p)));
    expect(second.filter((r) => r.ok)).toHaveLength(2);
    now = Date.parse('2026-11-26T12:00:00Z');
    // 4 of the day's 5 are used: one more, then the day is full.
    const third = await Promise.all([1, 2].map(() => ledger.reserve('192.0.2.2', p)));
    expect(third.filter((r) => r.ok)).toHaveLength(1);
    expect(third.find((r) => !r.ok)).toEqual({ ok: false, retryAtMs: Date.parse('2026-11-27T00:00:00Z') });
  });

  it('a day with bounces over the threshold keeps the address on its stage', async () => {
    let now = Date.parse('2026-11-26T10:00:00Z');
    const ledger = new WarmupLedger(node1.c.database.db, { now: () => now });
    const p = {
      id: 'p',
      stages: [
        { day: 1, daily_limit: 10, hourly_limit: null },
        { day: 2, daily_limit: 20, hourly_limit: null },
      ],
      maxBounceRate: 0.1,
      maxComplaintRate: 0.01,
    };
    for (let i = 0; i < 10; i++) expect((await ledger.reserve('192.0.2.3', p)).ok).toBe(true);
    // Two bounces of ten: 20 %, over the 10 % threshold.
    await node1.c.database.db
      .updateTable('warmup_counters')
      .set({ bounced: 2 })
      .where('address', '=', '192.0.2.3')
      .where('period', '=', 'd:2026-11-26')
      .execute();
    now += 86_400_000;
    expect(await ledger.warmupDay('192.0.2.3', p)).toBe(1);
    const day2 = await Promise.all(Array.from({ length: 12 }, () => ledger.reserve('192.0.2.3', p)));
    expect(day2.filter((r) => r.ok)).toHaveLength(10);
    // A clean day (no bounces) moves it on.
    now += 86_400_000;
    expect(await ledger.warmupDay('192.0.2.3', p)).toBe(2);
  });
});
