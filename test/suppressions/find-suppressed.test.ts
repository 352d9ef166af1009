/** The accept path's lookup (findSuppressed) and the bounce/complaint handlers' writer (addAutomatic). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let t: TestTenant;

async function add(tenant: TestTenant, items: { identifier: string; type: string; reason_category: string }[]) {
  const res = await call(ctx.app, 'POST', '/v1/suppressions', { key: tenant.apiKey, body: { items } });
  expect(res.statusCode, res.body).toBe(200);
}

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  await add(t, [
    { identifier: 'Ann@Example.COM', type: 'email', reason_category: 'hard_bounce' },
    { identifier: 'Blocked.Example.ORG', type: 'domain', reason_category: 'complaint' },
    { identifier: 'both.example', type: 'domain', reason_category: 'manual' },
    { identifier: 'vip@both.example', type: 'email', reason_category: 'unsubscribe' },
  ]);
});
afterAll(async () => {
  await ctx?.close();
});

describe('findSuppressed', () => {
  it('matches email entries case-insensitively (local part too, issue 13) and domain entries for every address there', async () => {
    const db = ctx.c.database.db;
    const emails = [
      'Ann@example.com',
      'Ann@EXAMPLE.com',
      'ann@example.com', // local part case differs: the same address
      'x@blocked.example.org',
      'Y@BLOCKED.Example.Org',
      'z@sub.blocked.example.org', // subdomain: not covered
      'free@example.com',
    ];
    const hits = await ctx.c.suppressions.findSuppressed(db, t.tenantId, emails);
    expect([...hits.keys()].sort()).toEqual(
      [
        'Ann@EXAMPLE.com',
        'Ann@example.com',
        'ann@example.com',
        'Y@BLOCKED.Example.Org',
        'x@blocked.example.org',
      ].sort(),
    );
    expect(hits.get('Ann@example.com')).toMatchObject({ reason_category: 'hard_bounce', type: 'email' });
    expect(hits.get('ann@example.com')).toMatchObject({ identifier: 'ann@example.com', type: 'email' });
    expect(hits.get('x@blocked.example.org')).toMatchObject({
      reason_category: 'complaint',
      type: 'domain',
      identifier: 'blocked.example.org',
    });
    expect(typeof hits.get('Y@BLOCKED.Example.Org')?.id).toBe('string');
  });

  it('prefers the email entry over the domain entry, and ignores other tenants', async () => {
    const db = ctx.c.database.db;
    const hits = await ctx.c.suppressions.findSuppressed(db, t.tenantId, ['vip@both.example', 'other@both.example']);
    expect(hits.get('vip@both.example')).toMatchObject({ type: 'email', reason_category: 'unsubscribe' });
    expect(hits.get('other@both.example')).toMatchObject({ type: 'domain', reason_category: 'manual' });

    const stranger = await createTenant(ctx);
    const none = await ctx.c.suppressions.findSuppressed(db, stranger.tenantId, ['Ann@example.com', 'x@both.example']);
    expect(none.size).toBe(0);
    expect((await ctx.c.suppressions.findSuppressed(db, t.tenantId, [])).size).toBe(0);
  });

  it('answers for 10,000 recipients in a transaction, quickly', async () => {
    const big = await createTenant(ctx);
    const suppressed = Array.from({ length: 2000 }, (_, i) => ({
      identifier: `s${i}@bulk.example`,
      type: 'email',
      reason_category: 'hard_bounce',
    }));
    await add(big, [...suppressed, { identifier: 'dead.example', type: 'domain', reason_category: 'invalid' }]);
    const recipients = Array.from({ length: 10_000 }, (_, i) =>
      i % 10 === 9 ? `r${i}@Dead.Example` : i % 5 === 0 ? `s${i / 5}@BULK.example` : `r${i}@bulk.example`,
    );
    const started = performance.now();
    const hits = await ctx.c.database.db
      .transaction()
      .execute((trx) => ctx.c.suppressions.findSuppressed(trx, big.tenantId, recipients));
    const ms = performance.now() - started;
    expect(hits.size).toBe(2000 + 1000);
    expect(hits.get('s0@BULK.example')?.type).toBe('email');
    expect(hits.get('r9@Dead.Example')?.type).toBe('domain');
    expect(hits.has('r1@bulk.example')).toBe(false);
    expect(ms).toBeLessThan(3000);
  });
});

describe('addAutomatic', () => {
  it("creates an entry in the caller's transaction and updates it on repeat, keeping its id", async () => {
    const a = await createTenant(ctx);
    const first = await ctx.c.database.db.transaction().execute((trx) =>
      ctx.c.suppressions.addAutomatic(trx, a.tenantId, {
        identifier: 'Bounced@Mail.Example.com',
        type: 'email',
        reason_category: 'hard_bounce',
        source: 'bounce',
        description: '550 5.1.1 no such user',
      }),
    );
    expect(first).toMatchObject({
      identifier: 'bounced@mail.example.com',
      type: 'email',
      reason_category: 'hard_bounce',
      source: 'bounce',
      description: '550 5.1.1 no such user',
    });
    const second = await ctx.c.suppressions.addAutomatic(ctx.c.database.db, a.tenantId, {
      identifier: 'Bounced@mail.example.com',
      type: 'email',
      reason_category: 'complaint',
      source: 'complaint',
      description: null,
    });
    expect(second.id).toBe(first.id);
    expect(second).toMatchObject({ reason_category: 'complaint', source: 'complaint', description: null });
    const hits = await ctx.c.suppressions.findSuppressed(ctx.c.database.db, a.tenantId, ['Bounced@MAIL.example.com']);
    expect(hits.get('Bounced@MAIL.example.com')?.id).toBe(first.id);
  });

  it("rolls back with the caller's transaction", async () => {
    const a = await createTenant(ctx);
    await expect(
      ctx.c.database.db.transaction().execute(async (trx) => {
        await ctx.c.suppressions.addAutomatic(trx, a.tenantId, {
          identifier: 'rollback@example.com',
          reason_category: 'unsubscribe',
          source: 'unsubscribe',
        });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const hits = await ctx.c.suppressions.findSuppressed(ctx.c.database.db, a.tenantId, ['rollback@example.com']);
    expect(hits.size).toBe(0);
  });
});
