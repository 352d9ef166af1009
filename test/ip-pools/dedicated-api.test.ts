/**
 * What a tenant's pools may hold now that source addresses are the operator's (issue 31 item 3,
 * docs/ip-pools.md "For the operator"): shared addresses and addresses dedicated to it; another
 * tenant's dedicated address is 422 on `addresses`, and a warmup policy goes only on an address
 * dedicated to the tenant. Pools made before a dedication are flagged, not changed. Dedications
 * from POSTYARD_SOURCE_ADDRESSES (`address=tenant-id`) count the same. The migration carries a
 * warmup that held before over as the operator's schedule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { carryWarmupOver } from '../../src/db/migrations/021_source_addresses.ts';
import { newId } from '../../src/lib/ids.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext({ env: { POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3,127.0.0.4,::1' } });
  a = await createTenant(ctx);
  b = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

const post = (t: TestTenant, url: string, body: unknown) => call(ctx.app, 'POST', url, { key: t.apiKey, body });
const patch = (t: TestTenant, url: string, body: unknown) => call(ctx.app, 'PATCH', url, { key: t.apiKey, body });
const get = (t: TestTenant, url: string) => call(ctx.app, 'GET', url, { key: t.apiKey });
const policyBody = { stages: [{ day: 1, daily_limit: 10 }], max_bounce_rate: 0.1, max_complaint_rate: 0.01 };

describe('pools hold shared addresses and the tenant’s dedicated ones', () => {
  it("another tenant's dedicated address is 422 at create and PATCH; the owner's pools take it", async () => {
    await ctx.c.sourceAddresses.dedicate('127.0.0.3', a.tenantId);
    const refused = await post(b, '/v1/ip-pools', {
      name: 'grab',
      addresses: [{ address: '127.0.0.2' }, { address: '127.0.0.3' }],
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().errors).toEqual([
      { code: 'validation_failed', field: 'addresses[1].address', message: '127.0.0.3 is dedicated to another tenant' },
    ]);
    const own = await post(b, '/v1/ip-pools', { name: 'shared-only', addresses: [{ address: '127.0.0.2' }] });
    expect(own.statusCode).toBe(201);
    const patched = await patch(b, `/v1/ip-pools/${own.json().id}`, { addresses: [{ address: '127.0.0.3' }] });
    expect(patched.statusCode).toBe(422);
    expect(patched.json().errors[0].field).toBe('addresses[0].address');
    const mine = await post(a, '/v1/ip-pools', {
      name: 'mine',
      addresses: [{ address: '127.0.0.3' }, { address: '127.0.0.2' }],
    });
    expect(mine.statusCode, mine.body).toBe(201);
    expect(mine.json().addresses.map((x: { flags: string[] }) => x.flags)).toEqual([[], []]);
  });

  it('a warmup policy goes only on an address dedicated to the tenant', async () => {
    const policy = (await post(a, '/v1/warmup-policies', policyBody)).json();
    const onShared = await post(a, '/v1/ip-pools', {
      name: 'warm-shared',
      addresses: [{ address: '127.0.0.2', warmup_policy_id: policy.id }],
    });
    expect(onShared.statusCode).toBe(422);
    expect(onShared.json().errors).toEqual([
      {
        code: 'validation_failed',
        field: 'addresses[0].warmup_policy_id',
        message:
          "127.0.0.2 is shared: a warmup policy may be attached only to an address dedicated to this tenant (warmup of a shared address is the operator's)",
      },
    ]);
    const onOwn = await post(a, '/v1/ip-pools', {
      name: 'warm-own',
      addresses: [{ address: '127.0.0.3', warmup_policy_id: policy.id }],
    });
    expect(onOwn.statusCode, onOwn.body).toBe(201);
  });

  it('a pool made before its address was dedicated to another tenant is flagged; PATCH refuses the address', async () => {
    const policy = (await post(b, '/v1/warmup-policies', policyBody)).json();
    await ctx.c.sourceAddresses.dedicate('127.0.0.4', b.tenantId);
    const pool = (
      await post(b, '/v1/ip-pools', {
        name: 'before',
        addresses: [{ address: '127.0.0.4', warmup_policy_id: policy.id }, { address: '127.0.0.2' }],
      })
    ).json();
    await ctx.c.sourceAddresses.dedicate('127.0.0.4', a.tenantId);
    const seen = (await get(b, `/v1/ip-pools/${pool.id}`)).json();
    expect(seen.addresses).toEqual([
      {
        address: '127.0.0.4',
        weight: 1,
        warmup_policy_id: policy.id,
        flags: ['dedicated_to_another_tenant', 'warmup_policy_ignored'],
      },
      { address: '127.0.0.2', weight: 1, warmup_policy_id: null, flags: [] },
    ]);
    const listed = (await get(b, '/v1/ip-pools?limit=100')).json().data.find((p: { id: string }) => p.id === pool.id);
    expect(listed.addresses[0].flags).toEqual(['dedicated_to_another_tenant', 'warmup_policy_ignored']);
    // Changes that leave the addresses alone still go through; a list keeping the address does not.
    expect((await patch(b, `/v1/ip-pools/${pool.id}`, { name: 'renamed' })).statusCode).toBe(200);
    const kept = await patch(b, `/v1/ip-pools/${pool.id}`, {
      addresses: [{ address: '127.0.0.4' }, { address: '127.0.0.2' }],
    });
    expect(kept.statusCode).toBe(422);
    // Shared again: usable again, but the policy does not apply to a shared address.
    await ctx.c.sourceAddresses.share('127.0.0.4');
    const shared = (await get(b, `/v1/ip-pools/${pool.id}`)).json();
    expect(shared.addresses[0].flags).toEqual(['warmup_policy_ignored']);
  });

  it('POSTYARD_SOURCE_ADDRESSES address=tenant-id dedicates too; an address no longer configured is flagged', async () => {
    // A second node of the same database whose configuration dedicates ::1 to B and lacks 127.0.0.4.
    const node = await createTestContext({
      shareWith: ctx,
      env: { POSTYARD_SOURCE_ADDRESSES: `127.0.0.2,127.0.0.3,::1=${b.tenantId}` },
    });
    try {
      const refused = await call(node.app, 'POST', '/v1/ip-pools', {
        key: a.apiKey,
        body: { name: 'v6', addresses: [{ address: '::1' }] },
      });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().errors[0].message).toBe('::1 is dedicated to another tenant');
      const ok = await call(node.app, 'POST', '/v1/ip-pools', {
        key: b.apiKey,
        body: { name: 'v6', addresses: [{ address: '::1' }] },
      });
      expect(ok.statusCode, ok.body).toBe(201);
      const before = (await get(b, '/v1/ip-pools?limit=100'))
        .json()
        .data.find((p: { name: string }) => p.name === 'renamed');
      const there = await call(node.app, 'GET', `/v1/ip-pools/${before.id}`, { key: b.apiKey });
      expect(there.json().addresses[0].flags).toEqual(['not_configured', 'warmup_policy_ignored']);
      await expect(node.c.sourceAddresses.share('::1')).rejects.toMatchObject({ code: 'validation_failed' });
    } finally {
      await node.close();
    }
  });
});

describe('upgrade (migration 021)', () => {
  it('a warmup that held before stays, as the operator’s schedule of the address (the first pool’s policy)', async () => {
    const db = ctx.c.database.db;
    const t1 = await createTenant(ctx);
    const t2 = await createTenant(ctx);
    const now = new Date().toISOString();
    const policy = async (tenantId: string, daily: number) => {
      const id = newId();
      await db
        .insertInto('warmup_policies')
        .values({
          tenant_id: tenantId,
          id,
          name: `p${daily}`,
          stages: JSON.stringify([{ day: 1, daily_limit: daily, hourly_limit: null }]),
          max_bounce_rate: 0.05,
          max_complaint_rate: 0.001,
          created_at: now,
          updated_at: now,
        })
        .execute();
      return id;
    };
    const pool = async (tenantId: string, address: string, policyId: string | null) => {
      const id = newId();
      await db
        .insertInto('ip_pools')
        .values({
          tenant_id: tenantId,
          id,
          name: `legacy-${id}`,
          overflow_pool_id: null,
          is_default: 0,
          mail_types: '[]',
          created_at: now,
          updated_at: now,
        })
        .execute();
      await db
        .insertInto('ip_pool_addresses')
        .values({ tenant_id: tenantId, pool_id: id, address, weight: 1, warmup_policy_id: policyId, position: 0 })
        .execute();
    };
    const first = await policy(t1.tenantId, 7);
    const second = await policy(t2.tenantId, 900);
    // Two tenants attached policies to 192.0.2.7: the first pool's (by id) applied to both.
    await pool(t1.tenantId, '192.0.2.7', first);
    await new Promise((r) => setTimeout(r, 5)); // pool ids are time-ordered: this one sorts second
    await pool(t2.tenantId, '192.0.2.7', second);
    await pool(t2.tenantId, '192.0.2.8', null);
    const carried = await carryWarmupOver(db as unknown as Parameters<typeof carryWarmupOver>[0], now);
    expect(carried).toEqual(['192.0.2.7']);
    const rows = await db.selectFrom('source_addresses').selectAll().where('address', 'like', '192.0.2.%').execute();
    expect(rows.map((r) => ({ ...r, max_bounce_rate: Number(r.max_bounce_rate) }))).toEqual([
      {
        address: '192.0.2.7',
        tenant_id: null,
        warmup_stages: JSON.stringify([{ day: 1, daily_limit: 7, hourly_limit: null }]),
        max_bounce_rate: 0.05,
        max_complaint_rate: expect.closeTo(0.001, 6),
        updated_at: now,
      },
    ]);
    // Run again (nothing new): rows already there are left alone.
    expect(await carryWarmupOver(db as unknown as Parameters<typeof carryWarmupOver>[0], now)).toEqual([]);
  });
});
