/**
 * PostgreSQL group-commit lanes (src/db/group-commit.ts): while a batch runs, work that arrives
 * waits for it and goes in the next batch whole, instead of opening a lane (a connection, a
 * statement and a WAL flush) per arrival; work that has waited `spillMs` behind a slow batch
 * gets a lane of its own, so a 10,000-recipient transmission does not hold everyone up.
 * SQLite has one writer and one lane: nothing here applies to it.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroupCommit } from '../../src/db/group-commit.ts';
import { createTestContext, DIALECT, type TestContext } from '../helpers/context.ts';

const PG = DIALECT === 'postgres';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!PG)('group-commit lanes on PostgreSQL', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  /** A unit that answers its transaction's id, after `sleepS` seconds in the server. */
  const unit = (group: GroupCommit, sleepS = 0) =>
    group.run(async (trx) => {
      if (sleepS > 0) await sql`select pg_sleep(${sleepS})`.execute(trx);
      return (await sql<{ tx: string }>`select txid_current()::text as tx`.execute(trx)).rows[0]?.tx;
    });

  /** Starts `n` units `gapMs` apart while a first one sleeps `sleepS`; their transaction ids. */
  async function arrivalsBehindASlowBatch(group: GroupCommit, sleepS: number, n: number, gapMs: number, laterS = 0) {
    const first = unit(group, sleepS);
    const later: Promise<string | undefined>[] = [];
    for (let i = 0; i < n; i++) {
      await sleep(gapMs);
      later.push(unit(group, laterS));
    }
    return { first: await first, later: await Promise.all(later) };
  }

  it('work arriving while a quick batch runs waits for it and commits as one batch', async () => {
    const group = new GroupCommit(ctx.c.database, { lanes: 4, spillMs: 2_000 });
    const { first, later } = await arrivalsBehindASlowBatch(group, 0.3, 5, 10);
    expect(new Set(later).size).toBe(1);
    expect(later[0]).not.toBe(first);
  });

  it('with spillMs 0 each arrival opens a lane of its own (the old behaviour, for contrast)', async () => {
    const group = new GroupCommit(ctx.c.database, { lanes: 4, spillMs: 0 });
    const { later } = await arrivalsBehindASlowBatch(group, 0.3, 5, 10);
    // Three free lanes take the first three arrivals one by one; the last two share the next.
    expect(new Set(later).size).toBeGreaterThanOrEqual(3);
  });

  it('work that waited spillMs behind a slow batch gets its own lane and is answered before it ends', async () => {
    const group = new GroupCommit(ctx.c.database, { lanes: 4, spillMs: 20 });
    let slowDone = false;
    const slow = unit(group, 3).then((tx) => {
      slowDone = true;
      return tx;
    });
    await sleep(20);
    const quick = await unit(group);
    expect(slowDone).toBe(false);
    expect(quick).not.toBe(await slow);
  });

  it('never more lanes than configured: the spill lane busy too, later work waits and goes in one batch', async () => {
    const group = new GroupCommit(ctx.c.database, { lanes: 2, spillMs: 5 });
    // The first arrival spills into lane 2 and holds it 0.5 s; the next three arrive meanwhile.
    const { first, later } = await arrivalsBehindASlowBatch(group, 2, 4, 20, 0.5);
    expect(later).not.toContain(first);
    expect(later.slice(1)).not.toContain(later[0]);
    expect(new Set(later.slice(1)).size).toBe(1);
  });
});
