/** GET /v1/suppressions (filters, keyset pages), GET and DELETE /v1/suppressions/{id}, tenant isolation. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';

interface Rec {
  id: string;
  identifier: string;
  type: string;
  reason_category: string;
}
interface PageBody {
  data: Rec[];
  next_cursor: string | null;
}

let ctx: TestContext;
let t: TestTenant;
let other: TestTenant;

async function add(tenant: TestTenant, items: { identifier: string; type: string; reason_category: string }[]) {
  const res = await call(ctx.app, 'POST', '/v1/suppressions', { key: tenant.apiKey, body: { items } });
  expect(res.statusCode, res.body).toBe(200);
}

async function page(tenant: TestTenant, query: Record<string, string>) {
  return call(ctx.app, 'GET', '/v1/suppressions', { key: tenant.apiKey, query });
}

async function ids(tenant: TestTenant, query: Record<string, string>): Promise<string[]> {
  const res = await page(tenant, { limit: '1000', ...query });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as PageBody).data.map((r) => r.identifier);
}

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  other = await createTenant(ctx);
  await add(t, [
    { identifier: 'Ann@Example.com', type: 'email', reason_category: 'hard_bounce' },
    { identifier: 'bob@example.com', type: 'email', reason_category: 'complaint' },
    { identifier: 'carl@example.net', type: 'email', reason_category: 'unsubscribe' },
    { identifier: 'Example.ORG', type: 'domain', reason_category: 'complaint' },
    { identifier: 'blocked.example', type: 'domain', reason_category: 'manual' },
  ]);
  await add(other, [{ identifier: 'bob@example.com', type: 'email', reason_category: 'complaint' }]);
});
afterAll(async () => {
  await ctx?.close();
});

describe('list', () => {
  it("returns the tenant's records newest first", async () => {
    const res = await page(t, {});
    expect(res.statusCode).toBe(200);
    const body = res.json() as PageBody;
    expect(body.next_cursor).toBeNull();
    expect(body.data).toHaveLength(5);
    const sortedDesc = [...body.data].sort((a, b) => (a.id < b.id ? 1 : -1));
    expect(body.data.map((r) => r.id)).toEqual(sortedDesc.map((r) => r.id));
  });

  it('filters by type, reason_category and identifier (exact after normalization)', async () => {
    expect((await ids(t, { type: 'domain' })).sort()).toEqual(['blocked.example', 'example.org']);
    expect((await ids(t, { reason_category: 'complaint' })).sort()).toEqual(['bob@example.com', 'example.org']);
    expect(await ids(t, { type: 'email', reason_category: 'complaint' })).toEqual(['bob@example.com']);
    expect(await ids(t, { identifier: '  Ann@EXAMPLE.COM ' })).toEqual(['ann@example.com']);
    expect(await ids(t, { identifier: 'ann@example.com' })).toEqual(['ann@example.com']); // one rule for case (issue 13)
    expect(await ids(t, { identifier: 'EXAMPLE.org' })).toEqual(['example.org']);
    expect(await ids(t, { identifier: 'example.org', type: 'email' })).toEqual([]);
    expect(await ids(t, { identifier: 'example.com' })).toEqual([]); // exact, not "ends with"
  });

  it('refuses unknown filter values and bad limits with 400 invalid_parameter', async () => {
    for (const query of <Record<string, string>[]>[
      { type: 'phone' },
      { reason_category: 'bored' },
      { limit: '1001' },
      { limit: '0' },
      { limit: 'ten' },
      { identifier: '' },
    ]) {
      const body = expectError(await page(t, query), 400, 'invalid_parameter');
      expect((body.errors[0] as { field?: string }).field, JSON.stringify(query)).toBe(Object.keys(query)[0]);
    }
  });

  it('pages without gaps or duplicates while rows are inserted between pages', async () => {
    const p = await createTenant(ctx);
    const initial = Array.from({ length: 23 }, (_, i) => ({
      identifier: `p${String(i).padStart(2, '0')}@page.example`,
      type: 'email',
      reason_category: 'manual',
    }));
    await add(p, initial);
    const seen: string[] = [];
    let cursor: string | null = null;
    let n = 0;
    do {
      const res = await page(p, { limit: '5', ...(cursor ? { cursor } : {}) });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as PageBody;
      seen.push(...body.data.map((r) => r.identifier));
      cursor = body.next_cursor;
      // Concurrent writers: new rows (newer ids) land before the cursor, never inside the walk.
      await add(p, [{ identifier: `new${n}@page.example`, type: 'email', reason_category: 'manual' }]);
      // An update of a row already seen does not move it.
      await add(p, [{ identifier: 'p22@page.example', type: 'email', reason_category: 'complaint' }]);
      n++;
    } while (cursor && n < 50);
    expect(n).toBe(5);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual(initial.map((i) => i.identifier).sort());
  });

  it('refuses a tampered or foreign cursor with 400 invalid_cursor', async () => {
    const res = await page(t, { limit: '2' });
    const cursor = (res.json() as PageBody).next_cursor ?? '';
    expect(cursor).not.toBe('');
    const [body = '', sig = ''] = cursor.split('.');
    const forged = Buffer.from(JSON.stringify({ id: 'ffffffff-ffff-7fff-bfff-ffffffffffff' })).toString('base64url');
    for (const bad of [`${body}x.${sig}`, `${body}.${sig.slice(1)}`, `${forged}.${sig}`, 'garbage', '.']) {
      const r = expectError(await page(t, { cursor: bad }), 400, 'invalid_cursor');
      expect((r.errors[0] as { field?: string }).field).toBe('cursor');
    }
    const next = await page(t, { limit: '2', cursor });
    expect(next.statusCode).toBe(200);
  });
});

describe('get and delete', () => {
  it('gets a record, deletes it (204), then 404s', async () => {
    await add(t, [{ identifier: 'gone@example.com', type: 'email', reason_category: 'manual' }]);
    const found = (await page(t, { identifier: 'gone@example.com' })).json() as PageBody;
    const id = found.data[0]?.id ?? '';
    const got = await call(ctx.app, 'GET', `/v1/suppressions/${id}`, { key: t.apiKey });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({ id, identifier: 'gone@example.com', type: 'email', source: 'api' });

    const del = await call(ctx.app, 'DELETE', `/v1/suppressions/${id}`, { key: t.apiKey });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expectError(await call(ctx.app, 'GET', `/v1/suppressions/${id}`, { key: t.apiKey }), 404, 'not_found');
    expectError(await call(ctx.app, 'DELETE', `/v1/suppressions/${id}`, { key: t.apiKey }), 404, 'not_found');
    // Lifted: a new entry for the same address is a create again.
    const re = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: t.apiKey,
      body: { items: [{ identifier: 'gone@example.com', type: 'email', reason_category: 'manual' }] },
    });
    expect(re.json()).toEqual({ created: 1, updated: 0 });
  });

  it("answers 404 for another tenant's id and for unknown ids, and never lists other tenants' rows", async () => {
    const theirs = ((await page(other, {})).json() as PageBody).data[0]?.id ?? '';
    expect(theirs).not.toBe('');
    expectError(await call(ctx.app, 'GET', `/v1/suppressions/${theirs}`, { key: t.apiKey }), 404, 'not_found');
    expectError(await call(ctx.app, 'DELETE', `/v1/suppressions/${theirs}`, { key: t.apiKey }), 404, 'not_found');
    // Still there for its owner.
    expect((await call(ctx.app, 'GET', `/v1/suppressions/${theirs}`, { key: other.apiKey })).statusCode).toBe(200);
    for (const id of ['not-a-uuid', '01900000-0000-7000-8000-000000000000', 'x'.repeat(65)]) {
      expectError(await call(ctx.app, 'GET', `/v1/suppressions/${id}`, { key: t.apiKey }), 404, 'not_found');
    }
    const mine = ((await page(t, {})).json() as PageBody).data.map((r) => r.id);
    expect(mine).not.toContain(theirs);
  });
});
