import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertMany } from '../../src/db/batch.ts';
import { isoAt } from '../../src/lib/clock.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';

let ctx: TestContext;

beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx?.close());

const EXPIRED = 100_000;

async function seed(prefix: string, n: number, expiresAt: string) {
  const rows = Array.from({ length: n }, (_, i) => ({
    tenant_id: 'tenant-purge',
    scope: 'POST /v1/transmissions',
    key: `${prefix}-${i}`,
    fingerprint: 'f',
    state: 'completed' as const,
    response_status: 202,
    response_body: '{"transmission_id":"t"}',
    locked_until: '2000-01-01T00:00:00.000Z',
    created_at: '2000-01-01T00:00:00.000Z',
    expires_at: expiresAt,
  }));
  for (let i = 0; i < rows.length; i += 5000)
    await insertMany(ctx.c.database.db, 'idempotency_keys', rows.slice(i, i + 5000));
}

describe('idempotency purge under load', () => {
  it('purging 100,000 expired keys leaves the event loop free between small batches and keeps live keys', async () => {
    await seed('old', EXPIRED, '2000-01-02T00:00:00.000Z');
    await seed('live', 50, isoAt(Date.now() + 3_600_000));

    // Counts event-loop turns while the purge runs. One DELETE of every expired row holds
    // SQLite's synchronous driver (so the whole process: HTTP, SMTP, delivery) for its duration,
    // and holds the write lock as long; batches with a yield in between let other work run.
    let turns = 0;
    const ticker = setInterval(() => turns++, 1);
    let removed: number;
    try {
      removed = await ctx.c.idempotency.purgeExpired();
    } finally {
      clearInterval(ticker);
    }
    expect(removed).toBe(EXPIRED);
    // 100 batches of 1,000 rows: the timer runs between (at least) most of them. A single
    // statement gave it no turn at all on SQLite.
    expect(turns).toBeGreaterThanOrEqual(20);

    const left = await ctx.c.database.db
      .selectFrom('idempotency_keys')
      .select(['key', 'expires_at'])
      .where('tenant_id', '=', 'tenant-purge')
      .execute();
    expect(left).toHaveLength(50);
    expect(left.every((r) => r.key.startsWith('live-'))).toBe(true);
  });

  it('a purge removes at most maxRows per run (the rest waits for the next run, under the lease)', async () => {
    await seed('older', 3000, '2000-01-02T00:00:00.000Z');
    expect(await ctx.c.idempotency.purgeExpired({ batch: 500, maxRows: 1000 })).toBe(1000);
    expect(await ctx.c.idempotency.purgeExpired({ batch: 500 })).toBe(2000);
    expect(await ctx.c.idempotency.purgeExpired()).toBe(0);
  });
});
