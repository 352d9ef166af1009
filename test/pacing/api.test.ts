import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertSuspension } from '../../src/modules/pacing/pacing.repo.ts';
import { WITHHELD_REASON } from '../../src/modules/pacing/pacing.service.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

/** /v1/pacing (docs/api.md "Pacing"): shapes, validation, per-tenant isolation of overrides. */
let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  a = await createTenant(ctx);
  b = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

describe('pacing API', () => {
  it('lists the shipped sites with their defaults; GET one shows null overrides', async () => {
    const list = await call(ctx.app, 'GET', '/v1/pacing/sites', { key: a.apiKey });
    expect(list.statusCode).toBe(200);
    const names = list.json().data.map((s: { site: string }) => s.site);
    expect(names).toEqual(['gmail', 'outlook', 'yahoo', 'apple', 'default']);
    const one = await call(ctx.app, 'GET', '/v1/pacing/sites/yahoo', { key: a.apiKey });
    expect(one.statusCode).toBe(200);
    expect(one.json()).toMatchObject({
      site: 'yahoo',
      max_connections: null,
      messages_per_connection: null,
      messages_per_minute: null,
      messages_per_hour: null,
      defaults: { max_connections: 5, messages_per_connection: 20 },
      updated_at: null,
    });
    expect(one.json().mx).toContain('.yahoodns.net');
    expect(one.json().effective).toEqual(one.json().defaults);
  });

  it("PUT sets this tenant's override; null goes back to the default; other tenants see none of it", async () => {
    const put = await call(ctx.app, 'PUT', '/v1/pacing/sites/gmail', {
      key: a.apiKey,
      body: { messages_per_minute: 120, max_connections: 2, messages_per_hour: null },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json()).toMatchObject({
      site: 'gmail',
      messages_per_minute: 120,
      max_connections: 2,
      messages_per_hour: null,
      messages_per_connection: null,
      effective: { messages_per_minute: 120, max_connections: 2, messages_per_hour: 100000 },
    });
    const again = await call(ctx.app, 'GET', '/v1/pacing/sites/gmail', { key: a.apiKey });
    expect(again.json().messages_per_minute).toBe(120);
    const other = await call(ctx.app, 'GET', '/v1/pacing/sites/gmail', { key: b.apiKey });
    expect(other.json()).toMatchObject({ messages_per_minute: null, max_connections: null, updated_at: null });
    const otherList = await call(ctx.app, 'GET', '/v1/pacing/sites', { key: b.apiKey });
    expect(otherList.json().data.every((s: { updated_at: string | null }) => s.updated_at === null)).toBe(true);
    // All null: the override is gone.
    const reset = await call(ctx.app, 'PUT', '/v1/pacing/sites/gmail', {
      key: a.apiKey,
      body: { messages_per_minute: null, max_connections: null },
    });
    expect(reset.statusCode).toBe(200);
    expect(reset.json().effective).toEqual(reset.json().defaults);
    const rows = await ctx.c.database.db.selectFrom('pacing_site_overrides').selectAll().execute();
    expect(rows).toHaveLength(0);
  });

  it('the worker sees an override after a refresh; limits apply in the tenant own scope', async () => {
    await call(ctx.app, 'PUT', '/v1/pacing/sites/outlook', { key: a.apiKey, body: { messages_per_minute: 7 } });
    await ctx.c.pacing.refresh();
    const base = ctx.c.pacing.profile('outlook').limits;
    const mine = ctx.c.pacing.limitsFor(a.tenantId, 'outlook', base);
    expect(mine).toEqual({ limits: { ...base, messagesPerMinute: 7 }, scope: a.tenantId });
    expect(ctx.c.pacing.limitsFor(b.tenantId, 'outlook', base)).toEqual({ limits: base, scope: '' });
  });

  it('rejects bad bodies (422) and unknown sites (404)', async () => {
    for (const body of [
      { messages_per_minute: 0 },
      { messages_per_minute: -5 },
      { messages_per_minute: 1.5 },
      { messages_per_minute: '100' },
      { messages_per_minute: 10_000_001 },
      { per_minute: 10 },
    ]) {
      const res = await call(ctx.app, 'PUT', '/v1/pacing/sites/gmail', { key: a.apiKey, body });
      expect(res.statusCode, JSON.stringify(body)).toBe(422);
      expect(res.json().errors[0].code).toBe('validation_failed');
    }
    for (const site of ['nosuch', 'GMAIL', 'x'.repeat(100)]) {
      const res = await call(ctx.app, 'PUT', `/v1/pacing/sites/${site}`, {
        key: a.apiKey,
        body: { messages_per_minute: 10 },
      });
      expect(res.statusCode).toBe(404);
      expect(res.json().errors[0].code).toBe('not_found');
    }
  });

  it('suspensions list what the rules stored, without recipient addresses', async () => {
    const row = await ctx.c.pacing.observe(
      'yahoo',
      'yahoo',
      '',
      '421 4.7.0 [TSS04] Messages from 127.0.0.1 to someone@example.com temporarily deferred',
    );
    expect(row?.rule).toBe('yahoo-tss04');
    const res = await call(ctx.app, 'GET', '/v1/pacing/suspensions', { key: b.apiKey });
    expect(res.statusCode).toBe(200);
    const s = res.json().data[0];
    expect(s).toMatchObject({ site: 'yahoo', source_address: null, rule: 'yahoo-tss04', action: 'suspend' });
    expect(s.reason).not.toContain('someone@example.com');
    expect(Date.parse(s.until) - Date.now()).toBeGreaterThan(3_500_000);
    expect(ctx.c.pacing.isSuspended('yahoo', null)).toBe(true);
    expect(ctx.c.pacing.isSuspended('gmail', null)).toBe(false);
    // A rule for another site does not fire on this one.
    expect(await ctx.c.pacing.observe('gmail', 'gmail', '', '421 [TSS04]')).toBeNull();
  });

  it('a suspension at a site named after a recipient domain does not tell other tenants that domain', async () => {
    // An operator rule without `sites:` can suspend any destination; its site is then the MX
    // domain of someone's recipient, and the reply may repeat it.
    const now = Date.now();
    await upsertSuspension(ctx.c.database.db, {
      site: 'smallcorp-secret.example',
      source_address: '192.0.2.77',
      action: 'suspend',
      factor: 1,
      rule: 'operator-any',
      reason: '550 5.7.1 smallcorp-secret.example refuses mail from 192.0.2.77',
      started_at: new Date(now).toISOString(),
      until: new Date(now + 3_600_000).toISOString(),
    });
    for (const [key, path] of [
      [a.apiKey, '/v1/pacing/suspensions'],
      [b.apiKey, '/v1/pacing/suspensions'],
    ] as const) {
      const res = await call(ctx.app, 'GET', path, { key });
      expect(res.statusCode).toBe(200);
      expect(res.body).not.toContain('smallcorp-secret');
      const s = res.json().data.find((x: { source_address: string | null }) => x.source_address === '192.0.2.77');
      expect(s).toMatchObject({ site: 'default', rule: 'operator-any', reason: WITHHELD_REASON });
    }
  });

  it('a slow rule (Gmail 4.7.28) halves the per-minute limit of that site x address without suspending it', async () => {
    const row = await ctx.c.pacing.observe(
      'gmail',
      'gmail',
      '192.0.2.9',
      '421-4.7.28 Our system has detected an unusual rate',
    );
    expect(row).toMatchObject({ rule: 'gmail-4.7.28', action: 'slow', factor: 0.5 });
    expect(ctx.c.pacing.isSuspended('gmail', '192.0.2.9')).toBe(false);
    const base = { ...ctx.c.pacing.profile('gmail').limits, messagesPerMinute: 10 };
    const grants = async (source: string) => {
      let n = 0;
      for (let i = 0; i < 10; i++)
        if (
          (await ctx.c.pacing.acquire({ site: 'gmail', profile: 'gmail', source, tenant: b.tenantId }, base)) === null
        )
          n++;
      return n;
    };
    expect(await grants('192.0.2.9')).toBe(5);
    // Another address at the same site is not slowed.
    expect(await grants('192.0.2.10')).toBe(10);
    const list = await call(ctx.app, 'GET', '/v1/pacing/suspensions', { key: a.apiKey });
    expect(
      list.json().data.find((x: { source_address: string | null }) => x.source_address === '192.0.2.9'),
    ).toMatchObject({
      site: 'gmail',
      action: 'slow',
      factor: 0.5,
    });
  });
});
