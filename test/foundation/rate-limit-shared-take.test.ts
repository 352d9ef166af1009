import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseStore } from '../../src/rate-limit/rate-limiter.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';

/**
 * DatabaseStore shares one statement among the requests of a key that wait behind a running one
 * (src/rate-limit/rate-limiter.ts). Sharing must grant exactly what one-by-one takes
 * would: never more than the bucket holds, in arrival order, with the same remaining counts.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('database rate-limit store: requests of one key share a statement', () => {
  it('100 requests at once on a bucket of 20: exactly 20 allowed, the first 20 to arrive, remaining 19..0', async () => {
    const store = new DatabaseStore(ctx.c.database);
    const p = { rps: 0.001, burst: 20 };
    const now = Date.now();
    const results = await Promise.all(Array.from({ length: 100 }, () => store.take('shared-100', p, now)));
    const allowed = results.map((r, i) => (r.allowed ? i : -1)).filter((i) => i >= 0);
    expect(allowed).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(results.slice(0, 20).map((r) => Math.floor(r.tokens))).toEqual(Array.from({ length: 20 }, (_, i) => 19 - i));
    for (const r of results.slice(20)) expect(r.tokens).toBeLessThan(1);
    // The bucket is empty in the database too: the next take, alone, is denied.
    expect((await store.take('shared-100', p, Date.now())).allowed).toBe(false);
  });

  it('a bucket with 5 left grants 5 of a shared take of 8 and keeps the rest denied', async () => {
    const store = new DatabaseStore(ctx.c.database);
    const p = { rps: 0.001, burst: 5 };
    const now = Date.now();
    const results = await Promise.all(Array.from({ length: 9 }, () => store.take('shared-9', p, now)));
    expect(results.filter((r) => r.allowed)).toHaveLength(5);
    expect(results.map((r) => r.allowed)).toEqual([true, true, true, true, true, false, false, false, false]);
  });

  it('keys do not share: two keys each get their own burst', async () => {
    const store = new DatabaseStore(ctx.c.database);
    const p = { rps: 0.001, burst: 3 };
    const now = Date.now();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.take(i % 2 ? 'key-a' : 'key-b', p, now).then((r) => [i % 2, r.allowed]),
      ),
    );
    expect(results.filter(([k, ok]) => k === 1 && ok)).toHaveLength(3);
    expect(results.filter(([k, ok]) => k === 0 && ok)).toHaveLength(3);
  });
});
