/**
 * The database rate-limit store shared by API nodes (DatabaseStore): nodes read their clocks
 * before they wait for the bucket's row lock, so takes reach the database out of clock order.
 * A take stamped earlier than the bucket's last update must not move the bucket's time back, or
 * the next take credits the same interval's refill a second time and the nodes together exceed
 * the budget (test/cluster/cluster.test.ts found it under load). Deterministic: explicit clocks.
 * Runs on both backends (the store is plain SQL; on SQLite it is not used by default).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseStore } from '../../src/rate-limit/rate-limiter.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';

describe('DatabaseStore with takes out of clock order', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => ctx?.close());

  it('never credits one interval twice', async () => {
    const store = new DatabaseStore(ctx.c.database);
    const p = { rps: 1, burst: 5 };
    const t0 = 1_000_000;
    // Empty the bucket at t0.
    for (let i = 0; i < 5; i++) expect((await store.take('k', p, t0)).allowed).toBe(true);
    expect((await store.take('k', p, t0)).allowed).toBe(false);
    // Node A (clock t0 + 3 s) commits first: 3 tokens refilled, one taken.
    expect((await store.take('k', p, t0 + 3000)).allowed).toBe(true);
    // Node B read its clock at t0 + 1 s but got the row lock only now: nothing to refill.
    expect((await store.take('k', p, t0 + 1000)).allowed).toBe(true);
    // Node A again at t0 + 3 s: one token left from the refill, then none.
    expect((await store.take('k', p, t0 + 3000)).allowed).toBe(true);
    const last = await store.take('k', p, t0 + 3000);
    // Before the fix the bucket's time had gone back to t0 + 1 s, so this take found 2 more tokens.
    expect(last.allowed).toBe(false);
    let allowed = 0;
    for (let i = 0; i < 10; i++) if ((await store.take('k', p, t0 + 3000)).allowed) allowed++;
    expect(allowed).toBe(0);
  });
});
