import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

/** /v1/ip-pools and /v1/warmup-policies: validation, uniqueness, roles, isolation, options.ip_pool. */
let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext({ env: { POSTYARD_SOURCE_ADDRESSES: '127.0.0.2, 127.0.0.3,::1' } });
  a = await createTenant(ctx, 'Shop <news@shop.test>');
  b = await createTenant(ctx, 'Other <x@other.test>');
});
afterAll(async () => {
  await ctx?.close();
});

const post = (t: TestTenant, url: string, body: unknown) => call(ctx.app, 'POST', url, { key: t.apiKey, body });
const patch = (t: TestTenant, url: string, body: unknown) => call(ctx.app, 'PATCH', url, { key: t.apiKey, body });
const get = (t: TestTenant, url: string) => call(ctx.app, 'GET', url, { key: t.apiKey });

describe('IP pools API', () => {
  it('creates a pool from configured addresses (201) and reads it back', async () => {
    const res = await post(a, '/v1/ip-pools', {
      name: 'main',
      addresses: [{ address: '127.0.0.2', weight: 3 }, { address: '127.0.0.3' }],
      default: true,
      mail_types: ['transactional'],
    });
    expect(res.statusCode, res.body).toBe(201);
    const pool = res.json();
    expect(pool).toMatchObject({
      name: 'main',
      default: true,
      overflow_pool_id: null,
      mail_types: ['transactional'],
      addresses: [
        { address: '127.0.0.2', weight: 3, warmup_policy_id: null },
        { address: '127.0.0.3', weight: 1, warmup_policy_id: null },
      ],
    });
    const again = await get(a, `/v1/ip-pools/${pool.id}`);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(pool);
    const list = await get(a, '/v1/ip-pools');
    expect(list.json().data.map((p: { id: string }) => p.id)).toContain(pool.id);
  });

  it('refuses addresses that are not configured (422 naming the entry) and duplicates', async () => {
    const res = await post(a, '/v1/ip-pools', {
      name: 'bad',
      addresses: [{ address: '127.0.0.2' }, { address: '192.0.2.7' }, { address: '127.0.0.2' }],
    });
    expect(res.statusCode).toBe(422);
    const fields = res.json().errors.map((e: { field: string }) => e.field);
    expect(fields).toEqual(['addresses[1].address', 'addresses[2].address']);
    // IPv6 is compared in canonical (lower-case) form.
    expect((await post(a, '/v1/ip-pools', { name: 'v6', addresses: [{ address: '::1' }] })).statusCode).toBe(201);
  });

  it('names are unique per tenant (409), not across tenants', async () => {
    const body = { name: 'dup', addresses: [{ address: '127.0.0.3' }] };
    expect((await post(a, '/v1/ip-pools', body)).statusCode).toBe(201);
    const again = await post(a, '/v1/ip-pools', body);
    expect(again.statusCode).toBe(409);
    expect(again.json().errors[0].code).toBe('name_taken');
    expect((await post(b, '/v1/ip-pools', body)).statusCode).toBe(201);
  });

  it('one default per tenant, each mail type in one pool', async () => {
    const first = (
      await post(a, '/v1/ip-pools', { name: 'd1', addresses: [{ address: '127.0.0.2' }], default: true })
    ).json();
    const second = (
      await post(a, '/v1/ip-pools', {
        name: 'd2',
        addresses: [{ address: '127.0.0.3' }],
        default: true,
        mail_types: ['transactional', 'marketing'],
      })
    ).json();
    const all = (await get(a, '/v1/ip-pools?limit=100')).json().data as {
      id: string;
      default: boolean;
      mail_types: string[];
    }[];
    expect(all.filter((p) => p.default).map((p) => p.id)).toEqual([second.id]);
    expect(all.filter((p) => p.mail_types.includes('transactional')).map((p) => p.id)).toEqual([second.id]);
    expect(all.find((p) => p.id === first.id)?.default).toBe(false);
  });

  it('overflow: same tenant only, never itself, no cycles', async () => {
    const p1 = (await post(a, '/v1/ip-pools', { name: 'o1', addresses: [{ address: '127.0.0.2' }] })).json();
    const p2 = (
      await post(a, '/v1/ip-pools', { name: 'o2', addresses: [{ address: '127.0.0.3' }], overflow_pool_id: p1.id })
    ).json();
    expect(p2.overflow_pool_id).toBe(p1.id);
    const foreign = (await post(b, '/v1/ip-pools', { name: 'bo', addresses: [{ address: '127.0.0.2' }] })).json();
    const cross = await patch(a, `/v1/ip-pools/${p1.id}`, { overflow_pool_id: foreign.id });
    expect(cross.statusCode).toBe(422);
    expect(cross.json().errors[0].field).toBe('overflow_pool_id');
    const self = await patch(a, `/v1/ip-pools/${p1.id}`, { overflow_pool_id: p1.id });
    expect(self.statusCode).toBe(422);
    const cycle = await patch(a, `/v1/ip-pools/${p1.id}`, { overflow_pool_id: p2.id });
    expect(cycle.statusCode).toBe(422);
    expect(cycle.json().errors[0].message).toMatch(/cycle/);
    // A pool another overflows into cannot be deleted until that changes.
    const del = await call(ctx.app, 'DELETE', `/v1/ip-pools/${p1.id}`, { key: a.apiKey });
    expect(del.statusCode).toBe(409);
    expect((await patch(a, `/v1/ip-pools/${p2.id}`, { overflow_pool_id: null })).statusCode).toBe(200);
    expect((await call(ctx.app, 'DELETE', `/v1/ip-pools/${p1.id}`, { key: a.apiKey })).statusCode).toBe(204);
    expect((await get(a, `/v1/ip-pools/${p1.id}`)).statusCode).toBe(404);
  });

  it("another tenant's pool is 404 for every verb", async () => {
    const p = (await post(a, '/v1/ip-pools', { name: 'mine', addresses: [{ address: '127.0.0.2' }] })).json();
    expect((await get(b, `/v1/ip-pools/${p.id}`)).statusCode).toBe(404);
    expect((await patch(b, `/v1/ip-pools/${p.id}`, { name: 'taken' })).statusCode).toBe(404);
    expect((await call(ctx.app, 'DELETE', `/v1/ip-pools/${p.id}`, { key: b.apiKey })).statusCode).toBe(404);
    expect((await get(a, `/v1/ip-pools/${p.id}`)).json().name).toBe('mine');
  });
});

describe('Warmup policies API', () => {
  it('creates, sorts stages, attaches to pool addresses; in use = 409 on delete', async () => {
    const res = await post(a, '/v1/warmup-policies', {
      name: 'slow',
      stages: [
        { day: 3, daily_limit: 500, hourly_limit: 100 },
        { day: 1, daily_limit: 50 },
      ],
      max_bounce_rate: 0.05,
      max_complaint_rate: 0.001,
    });
    expect(res.statusCode, res.body).toBe(201);
    const policy = res.json();
    expect(policy.stages).toEqual([
      { day: 1, daily_limit: 50, hourly_limit: null },
      { day: 3, daily_limit: 500, hourly_limit: 100 },
    ]);
    // A policy may be attached only to an address dedicated to the tenant (docs/ip-pools.md).
    await ctx.c.sourceAddresses.dedicate('::1', a.tenantId);
    const pool = await post(a, '/v1/ip-pools', {
      name: 'warm',
      addresses: [{ address: '::1', warmup_policy_id: policy.id }],
    });
    expect(pool.statusCode, pool.body).toBe(201);
    expect(pool.json().addresses[0].warmup_policy_id).toBe(policy.id);
    const del = await call(ctx.app, 'DELETE', `/v1/warmup-policies/${policy.id}`, { key: a.apiKey });
    expect(del.statusCode).toBe(409);
    expect(del.json().errors[0].code).toBe('in_use');
    // Another tenant can neither see the policy nor attach it.
    expect((await get(b, `/v1/warmup-policies/${policy.id}`)).statusCode).toBe(404);
    const stolen = await post(b, '/v1/ip-pools', {
      name: 'steal',
      addresses: [{ address: '127.0.0.2', warmup_policy_id: policy.id }],
    });
    expect(stolen.statusCode).toBe(422);
    expect(stolen.json().errors).toEqual([
      { code: 'validation_failed', field: 'addresses[0].warmup_policy_id', message: 'no such warmup policy' },
    ]);
  });

  it('validates stages and rates', async () => {
    const bad = [
      { stages: [{ day: 2, daily_limit: 10 }], max_bounce_rate: 0.1, max_complaint_rate: 0.1 },
      {
        stages: [
          { day: 1, daily_limit: 10 },
          { day: 1, daily_limit: 20 },
        ],
        max_bounce_rate: 0.1,
        max_complaint_rate: 0.1,
      },
      { stages: [{ day: 1, daily_limit: 10, hourly_limit: 11 }], max_bounce_rate: 0.1, max_complaint_rate: 0.1 },
      { stages: [{ day: 1, daily_limit: 10 }], max_bounce_rate: 1.5, max_complaint_rate: 0.1 },
      { stages: [], max_bounce_rate: 0.1, max_complaint_rate: 0.1 },
    ];
    for (const body of bad)
      expect((await post(a, '/v1/warmup-policies', body)).statusCode, JSON.stringify(body)).toBe(422);
  });

  it('keeps rates to six decimal places, so tiny rates are stored on PostgreSQL too (found by the fuzz test: 500 before)', async () => {
    const created = await post(a, '/v1/warmup-policies', {
      name: 'tiny rates',
      stages: [{ day: 1, daily_limit: 10 }],
      max_bounce_rate: 5e-324,
      max_complaint_rate: 0.0000014,
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ max_bounce_rate: 0, max_complaint_rate: 0.000001 });
    const id = created.json().id;
    const patched = await patch(a, `/v1/warmup-policies/${id}`, {
      max_complaint_rate: 5e-324,
      max_bounce_rate: 0.0123456789,
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ max_bounce_rate: 0.012346, max_complaint_rate: 0 });
    expect((await get(a, `/v1/warmup-policies/${id}`)).json()).toMatchObject({
      max_bounce_rate: 0.012346,
      max_complaint_rate: 0,
    });
  });
});

describe('options.ip_pool on transmissions', () => {
  it('takes a pool id or name of the tenant; unknown or foreign is 422', async () => {
    const pool = (await post(a, '/v1/ip-pools', { name: 'by-name', addresses: [{ address: '127.0.0.3' }] })).json();
    const foreign = (await post(b, '/v1/ip-pools', { name: 'foreign', addresses: [{ address: '127.0.0.3' }] })).json();
    const send = (ip_pool: string) =>
      post(a, '/v1/transmissions', {
        recipients: [{ email: 'x@dest.test' }],
        content: { subject: 's', text: 't' },
        options: { ip_pool, sandbox: true },
      });
    for (const ref of ['by-name', pool.id]) {
      const res = await send(ref);
      expect(res.statusCode, res.body).toBe(202);
      const tx = await get(a, `/v1/transmissions/${res.json().transmission_id}`);
      expect(tx.json().options.ip_pool_id).toBe(pool.id);
    }
    for (const ref of ['nope', foreign.id]) {
      const res = await send(ref);
      expect(res.statusCode).toBe(422);
      expect(res.json().errors[0].field).toBe('options.ip_pool');
    }
  });
});
