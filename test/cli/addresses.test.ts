/**
 * `postyard addresses list|dedicate|share|warmup` (docs/ip-pools.md "For the operator") as real
 * child processes against the test's own database (both backends): what they print, what they
 * store, and a clear line with exit code 2 for every bad input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { killChildren, runCli, SPAWN_TEST_TIMEOUT_MS } from '../helpers/server-process.ts';
import { cliEnvFor } from './cli-env.ts';

let ctx: TestContext;
let env: Record<string, string>;
let acme: TestTenant;
let other: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext({ env: { POSTYARD_SOURCE_ADDRESSES: '127.0.0.2,127.0.0.3' } });
  acme = await createTenant(ctx);
  other = await createTenant(ctx);
  // 127.0.0.4 is dedicated by the configuration; the commands must leave it alone.
  env = cliEnvFor(ctx, { POSTYARD_SOURCE_ADDRESSES: `127.0.0.2,127.0.0.3,127.0.0.4=${other.tenantId}` });
});
afterAll(async () => {
  killChildren();
  await ctx?.close();
});

const addresses = (...args: string[]) => runCli(['addresses', ...args], { env });
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('postyard addresses', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('dedicate, list, share: stored, and the pools of other tenants that now skip it are counted', async () => {
    // Another tenant's pool already holds the address (made while it was shared).
    await ctx.c.ipPools.create(ctx.c.database.db, other.tenantId, {
      name: 'old',
      addresses: [{ address: '127.0.0.3' }],
    });
    const dedicated = await addresses('dedicate', '--address', '127.0.0.3', '--tenant', acme.tenantId);
    expect(dedicated.code, dedicated.stderr).toBe(0);
    expect(dedicated.stdout).toBe(
      `127.0.0.3: dedicated to ${acme.tenantId} (Test tenant)\n` +
        'warmup: none\n' +
        '1 pool(s) of other tenants hold it: their mail skips it (flagged dedicated_to_another_tenant)\n',
    );
    const row = await ctx.c.database.db
      .selectFrom('source_addresses')
      .selectAll()
      .where('address', '=', '127.0.0.3')
      .executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(acme.tenantId);

    const listed = await addresses('list', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    expect(lines(listed.stdout)).toEqual([
      expect.objectContaining({ address: '127.0.0.2', status: 'shared', tenant_id: null, configured: true }),
      expect.objectContaining({
        address: '127.0.0.3',
        status: 'dedicated',
        tenant_id: acme.tenantId,
        dedicated_by: 'command',
        pools: 1,
        skipped_in_pools: 1,
      }),
      expect.objectContaining({
        address: '127.0.0.4',
        status: 'dedicated',
        tenant_id: other.tenantId,
        dedicated_by: 'config',
      }),
    ]);
    const text = await addresses('list');
    expect(text.stdout).toMatch(/^ADDRESS\s+STATUS\s+WARMUP\s+POOLS$/m);
    expect(text.stdout).toMatch(/^127\.0\.0\.4\s+dedicated to \S+ \(Test tenant\) \[POSTYARD_SOURCE_ADDRESSES\]/m);

    const shared = await addresses('share', '--address', '127.0.0.3', '--json');
    expect(shared.code, shared.stderr).toBe(0);
    expect(JSON.parse(shared.stdout)).toMatchObject({ address: '127.0.0.3', status: 'shared', tenant_id: null });
  });

  it("warmup sets and takes off the operator's schedule", async () => {
    const set = await addresses(
      'warmup',
      '--address',
      '127.0.0.2',
      '--stages',
      '3:500:100,1:50',
      '--max-bounce-rate',
      '0.05',
      '--max-complaint-rate',
      '0.001',
      '--json',
    );
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      address: '127.0.0.2',
      warmup: 'operator',
      operator_warmup: {
        stages: [
          { day: 1, daily_limit: 50, hourly_limit: null },
          { day: 3, daily_limit: 500, hourly_limit: 100 },
        ],
        max_bounce_rate: 0.05,
      },
    });
    const off = await addresses('warmup', '--address', '127.0.0.2', '--off', '--json');
    expect(off.code, off.stderr).toBe(0);
    expect(JSON.parse(off.stdout)).toMatchObject({ warmup: null, operator_warmup: null });
  });

  it('bad input: one clear line, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['dedicate', '--address', '192.0.2.1', '--tenant', acme.tenantId],
        /^postyard: address: 192\.0\.2\.1 is not one of this host's source addresses \(POSTYARD_SOURCE_ADDRESSES\)\n$/,
      ],
      [['dedicate', '--address', '127.0.0.2', '--tenant', '0193a5b2-0000-7000-8000-000000000000'], /Tenant not found/],
      [
        ['share', '--address', '127.0.0.4'],
        /^postyard: address: 127\.0\.0\.4 is dedicated in POSTYARD_SOURCE_ADDRESSES; change the configuration instead\n$/,
      ],
      [['warmup', '--address', '127.0.0.2', '--stages', '1-50'], /"1-50" is not day:daily_limit/],
      [['warmup', '--address', '127.0.0.2'], /give --stages, --max-bounce-rate and --max-complaint-rate, or --off/],
    ];
    for (const [args, message] of cases) {
      const r = await addresses(...args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toMatch(message);
    }
  });
});
