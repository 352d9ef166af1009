import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { insertMany } from '../../src/db/batch.ts';
import type { MessagesTable } from '../../src/db/schema.ts';
import { newId } from '../../src/lib/ids.ts';
import { FairClaimer, TENANTS_PER_CLAIM } from '../../src/modules/delivery/fair-claim.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';

/**
 * FairClaimer against a real database (docs/pacing.md "Fairness"): tenants in turn, each its
 * share, transactional before marketing, in due order, never a row that is not due or is leased.
 * The delivery-level test is fairness.test.ts; this one pins the claim's own rules, both backends.
 */
let ctx: TestContext;
let txId: string;
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

beforeAll(async () => {
  ctx = await createTestContext();
  const t = await ctx.c.tenants.create({ name: 'fair', from: 'Shop <shop@fair.test>' });
  txId = newId();
  await ctx.c.database.db
    .insertInto('transmissions')
    .values({
      tenant_id: t.tenant_id,
      id: txId,
      source: 'api',
      mail_type: 'marketing',
      tags: '[]',
      metadata: '{}',
      content: '{"subject":"x","text":"y"}',
      raw_message: null,
      options: '{}',
      total_accepted: 0,
      total_rejected: 0,
      start_time: null,
      created_at: at(0),
    } as never)
    .execute();
}, 60_000);
afterAll(async () => {
  await ctx?.close();
});
beforeEach(async () => {
  await ctx.c.database.db.deleteFrom('messages').execute();
});

interface Row {
  tenant: string;
  priority?: 0 | 1;
  /** Seconds after T0. */
  due?: number;
  state?: MessagesTable['state'];
}

let seq = 0;
async function queue(rows: Row[]): Promise<string[]> {
  const made = rows.map(
    (r): MessagesTable => ({
      tenant_id: r.tenant,
      id: newId(),
      transmission_id: txId,
      recipient: `r${seq++}@dest.test`,
      recipient_name: null,
      recipient_domain: 'dest.test',
      substitution_data: null,
      metadata: '{}',
      state: r.state ?? 'queued',
      attempt_count: 0,
      next_attempt_at: at(r.due ?? 0),
      locked_until: null,
      locked_by: null,
      last_response: null,
      created_at: at(0),
      updated_at: at(0),
      priority: r.priority ?? 1,
    }),
  );
  await ctx.c.database.db.transaction().execute((trx) => insertMany(trx, 'messages', made));
  return made.map((m) => m.id);
}

/** Tenant ids in the order the walk visits them (ascending). */
const tenantIds = (n: number) => Array.from({ length: n }, (_, i) => `tenant-${String(i).padStart(3, '0')}`);
const count = (rows: MessagesTable[]) => {
  const by = new Map<string, number>();
  for (const r of rows) by.set(r.tenant_id, (by.get(r.tenant_id) ?? 0) + 1);
  return by;
};
const NOW = T0 + 3_600_000;

describe('FairClaimer', () => {
  it('gives every tenant walked an equal share, backlog or not', async () => {
    const [big, small1, small2] = tenantIds(3) as [string, string, string];
    await queue([
      ...Array.from({ length: 500 }, () => ({ tenant: big })),
      ...Array.from({ length: 20 }, () => ({ tenant: small1 })),
      ...Array.from({ length: 20 }, () => ({ tenant: small2 })),
    ]);
    const got = await new FairClaimer().claim(ctx.c.database, 'w', 30, 60_000, new Set(), NOW);
    expect(Object.fromEntries(count(got))).toEqual({ [big]: 10, [small1]: 10, [small2]: 10 });
  });

  it("takes a tenant's due transactional mail before its marketing mail, each in due order", async () => {
    const [t] = tenantIds(1) as [string];
    const marketing = await queue([
      { tenant: t, priority: 1, due: 1 },
      { tenant: t, priority: 1, due: 2 },
    ]);
    const transactional = await queue([
      { tenant: t, priority: 0, due: 30 },
      { tenant: t, priority: 0, due: 20 },
      { tenant: t, priority: 0, due: 10 },
    ]);
    const claimer = new FairClaimer();
    const first = await claimer.claim(ctx.c.database, 'w', 4, 60_000, new Set(), NOW);
    expect(new Set(first.map((m) => m.id))).toEqual(
      new Set([...transactional, marketing[0]].filter((x): x is string => !!x)),
    );
    const second = await claimer.claim(ctx.c.database, 'w', 4, 60_000, new Set(), NOW);
    expect(second.map((m) => m.id)).toEqual([marketing[1]]);
  });

  it('never takes a message that is not due, final, or leased by another claim', async () => {
    const [t] = tenantIds(1) as [string];
    const [later] = await queue([{ tenant: t, due: 7_200 }]);
    await queue([
      { tenant: t, state: 'delivered' },
      { tenant: t, state: 'failed' },
    ]);
    const due = await queue([
      { tenant: t, due: 5 },
      { tenant: t, state: 'deferred', due: 6 },
    ]);
    const claimer = new FairClaimer();
    const got = await claimer.claim(ctx.c.database, 'w1', 10, 60_000, new Set(), NOW);
    expect(new Set(got.map((m) => m.id))).toEqual(new Set(due));
    for (const m of got) {
      expect(m.state).toBe('sending');
      expect(m.locked_by).toBe('w1');
      expect(m.next_attempt_at).toBe(new Date(NOW + 60_000).toISOString());
    }
    // Leased: another worker's claim before the lease ends gets nothing (and not `later`).
    expect(await new FairClaimer().claim(ctx.c.database, 'w2', 10, 60_000, new Set(), NOW + 1_000)).toEqual([]);
    // After the lease ran out, the rows are claimable again (a crashed worker's mail comes back).
    const again = await new FairClaimer().claim(ctx.c.database, 'w2', 10, 60_000, new Set(), NOW + 61_000);
    expect(new Set(again.map((m) => m.id))).toEqual(new Set(due));
    expect(again.map((m) => m.id)).not.toContain(later);
  });

  it('takes over leases that ran out first, with the new holder and lease, never of a tenant in skip', async () => {
    // A claimed row leaves the indexes the fair claim reads (migration 020): a lease that ran out
    // is found by its own index, or a crashed worker's mail would never come back.
    const [a, b, c] = tenantIds(3) as [string, string, string];
    const mine = await queue([{ tenant: a }, { tenant: a }, { tenant: c }]);
    expect(await new FairClaimer().claim(ctx.c.database, 'w1', 10, 60_000, new Set(), NOW)).toHaveLength(3);
    const waiting = await queue([{ tenant: b }, { tenant: b }]);
    const after = NOW + 61_000;
    // Tenant a is skipped: its expired row stays with w1; c's comes back.
    const first = await new FairClaimer().claim(ctx.c.database, 'w2', 10, 60_000, new Set([a]), after);
    expect(first.map((m) => m.id)).toEqual([mine[2]]);
    for (const m of first) {
      expect(m.state).toBe('sending');
      expect(m.locked_by).toBe('w2');
      expect(m.locked_until).toBe(new Date(after + 60_000).toISOString());
      expect(m.next_attempt_at).toBe(m.locked_until);
    }
    const second = await new FairClaimer().claim(ctx.c.database, 'w2', 10, 60_000, new Set(), after);
    expect(new Set(second.map((m) => m.id))).toEqual(new Set(mine.slice(0, 2)));
    const third = await new FairClaimer().claim(ctx.c.database, 'w2', 10, 60_000, new Set(), after);
    expect(new Set(third.map((m) => m.id))).toEqual(new Set(waiting));
    // Nothing is held twice: every row is w2's now, once.
    const rows = await ctx.c.database.db.selectFrom('messages').select(['id', 'state', 'locked_by']).execute();
    expect(rows.filter((r) => r.state === 'sending' && r.locked_by === 'w2')).toHaveLength(5);
  });

  it('walks on past tenants that have nothing due in the same claim', async () => {
    // 40 tenants whose pending mail is leased (in flight) or due later, walked before the one
    // tenant with mail due. Before, the claim returned nothing (its 32 tenants had nothing due)
    // and the worker slept its poll interval before the next claim walked on.
    const tenants = tenantIds(41);
    const busy = tenants.slice(0, 40);
    const waiting = tenants[40] as string;
    await queue(busy.map((tenant, i) => (i % 2 ? { tenant, state: 'sending', due: 7_200 } : { tenant, due: 7_200 })));
    const [due] = await queue([{ tenant: waiting, priority: 0 }]);
    const got = await new FairClaimer().claim(ctx.c.database, 'w', 200, 60_000, new Set(), NOW);
    expect(got.map((m) => m.id)).toEqual([due]);
    // Nothing due anywhere: one turn at most, nothing taken, and the next claim still works.
    const claimer = new FairClaimer(tenants[20]);
    expect(await claimer.claim(ctx.c.database, 'w', 200, 60_000, new Set(), NOW)).toEqual([]);
    expect(await claimer.claim(ctx.c.database, 'w', 200, 60_000, new Set(), NOW)).toEqual([]);
    const later = await claimer.claim(ctx.c.database, 'w', 200, 60_000, new Set(), NOW + 7_200_000);
    expect(later.length).toBeGreaterThan(0);
  });

  it('passes over the tenants in skip', async () => {
    const [a, b] = tenantIds(2) as [string, string];
    await queue([{ tenant: a }, { tenant: a }, { tenant: b }, { tenant: b }]);
    const got = await new FairClaimer().claim(ctx.c.database, 'w', 10, 60_000, new Set([a]), NOW);
    expect(got.map((m) => m.tenant_id)).toEqual([b, b]);
  });

  it('reaches every tenant with due work within ceil(tenants / batch) claims when the batch is small', async () => {
    // 10 tenants, batches of 4: before, each claim walked 32 tenants (all 10, so the walk wrapped)
    // and the batch filled with the first 4: tenants 5-10 got nothing until 1-4 ran dry.
    const tenants = tenantIds(10);
    await queue(tenants.flatMap((tenant) => Array.from({ length: 5 }, () => ({ tenant }))));
    const claimer = new FairClaimer();
    const seen = new Set<string>();
    for (let i = 0; i < Math.ceil(10 / 4); i++) {
      for (const m of await claimer.claim(ctx.c.database, 'w', 4, 60_000, new Set(), NOW)) seen.add(m.tenant_id);
    }
    expect([...seen].sort()).toEqual(tenants);
  });

  it('reaches every tenant within ceil(tenants / TENANTS_PER_CLAIM) + 1 claims from any cursor', async () => {
    // + 1: the claim that reaches the last tenant walks fewer than TENANTS_PER_CLAIM.
    const tenants = tenantIds(TENANTS_PER_CLAIM * 2 + 5);
    await queue(tenants.flatMap((tenant) => Array.from({ length: 3 }, () => ({ tenant }))));
    const claimer = new FairClaimer(tenants[40]);
    const seen = new Set<string>();
    for (let i = 0; i < Math.ceil(tenants.length / TENANTS_PER_CLAIM) + 1; i++) {
      const got = await claimer.claim(ctx.c.database, 'w', 200, 60_000, new Set(), NOW);
      for (const m of got) seen.add(m.tenant_id);
    }
    expect(seen.size).toBe(tenants.length);
  });
  it('returns each claimed row whole, as the table holds it after the claim (every column, numbers as numbers)', async () => {
    const [tenant] = tenantIds(1) as [string];
    const [id] = await queue([{ tenant, priority: 0 }]);
    // Values of every kind the claim hands the worker: text with quotes, newlines and non-ASCII,
    // JSON text, NULL, integers.
    await ctx.c.database.db
      .updateTable('messages')
      .set({
        recipient_name: 'Zoë "Z" O\'Brien\n',
        substitution_data: '{"name":"Zoë","list":[1,2]}',
        attempt_count: 3,
        last_response: '451 4.7.1 "try later"',
        source_address: '127.0.0.2',
      })
      .where('id', '=', id as string)
      .execute();
    const [got] = await new FairClaimer().claim(ctx.c.database, 'w', 10, 60_000, new Set(), NOW);
    const stored = await ctx.c.database.db
      .selectFrom('messages')
      .selectAll()
      .where('id', '=', id as string)
      .executeTakeFirstOrThrow();
    expect(got).toEqual(stored);
    expect(Object.keys(got as object).sort()).toEqual(Object.keys(stored).sort());
    expect(got?.state).toBe('sending');
    expect(got?.attempt_count).toBe(3);
    expect(got?.priority).toBe(0);
  });
});
