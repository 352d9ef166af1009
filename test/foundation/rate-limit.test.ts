/**
 * Rate limits per API key (docs/api.md "Rate limits"): token bucket, RateLimit-* headers, 429, across
 * nodes; and per tenant, all its keys together (issue 13: making keys multiplied the limit).
 */
import net from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  TEST_DATABASE_URL,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { setTenantRateLimits } from '../../src/modules/tenants/rate-limits.ts';
import { expectError } from '../helpers/security-suite.ts';
import { killChildren, runCli, SPAWN_TEST_TIMEOUT_MS } from '../helpers/server-process.ts';

// The per-key tests make many keys of one tenant: the per-tenant limit is off for them.
const LIMITED = { POSTYARD_RATE_LIMIT_RPS: '1', POSTYARD_RATE_LIMIT_BURST: '3', POSTYARD_TENANT_RATE_LIMIT_RPS: '0' };
const TENANT_LIMITED = {
  POSTYARD_RATE_LIMIT_RPS: '1',
  POSTYARD_RATE_LIMIT_BURST: '3',
  POSTYARD_TENANT_RATE_LIMIT_RPS: '1',
  POSTYARD_TENANT_RATE_LIMIT_BURST: '5',
};
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

function list(ctx: TestContext, key: string) {
  return call(ctx.app, 'GET', '/v1/api-keys', { key });
}

function expectRateHeaders(res: LightMyRequestResponse, limit: number, remaining?: number) {
  expect(res.headers['ratelimit-limit']).toBe(String(limit));
  expect(res.headers['ratelimit-remaining']).toMatch(/^\d+$/);
  expect(res.headers['ratelimit-reset']).toMatch(/^\d+$/);
  if (remaining !== undefined) expect(res.headers['ratelimit-remaining']).toBe(String(remaining));
}

function expect429(res: LightMyRequestResponse) {
  expectError(res, 429, 'rate_limited');
  const retryAfter = Number(res.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(2);
  expectRateHeaders(res, 3, 0);
}

/**
 * The bucket refills 1 token/s, so "the 4th quick request is refused" holds only when the burst
 * is sent within a second. `run` sends one burst with fresh keys and returns the answers; on a
 * machine so loaded that the burst took >= 800 ms it is repeated (3 attempts) before asserting.
 */
async function quickly<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const t0 = Date.now();
    const out = await run();
    if (Date.now() - t0 < 800 || attempt === 3) return out;
  }
}

async function sequence(n: number, send: () => Promise<LightMyRequestResponse>) {
  const out: LightMyRequestResponse[] = [];
  for (let i = 0; i < n; i++) out.push(await send());
  return out;
}

async function redisReachable(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname || '127.0.0.1', port: Number(port || 6379) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

describe('token bucket per API key (RPS=1, BURST=3)', () => {
  let ctx: TestContext;
  let tenant: TestTenant;
  beforeAll(async () => {
    ctx = await createTestContext({ env: LIMITED });
    tenant = await createTenant(ctx);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('the 4th quick request is 429 rate_limited with Retry-After; RateLimit-* headers on every answer', async () => {
    const answers = await quickly(async () => {
      const key = await keyWithScopes(ctx, tenant.tenantId, ['manage:api-keys']);
      return sequence(4, () => list(ctx, key));
    });
    [2, 1, 0].forEach((remaining, i) => {
      const res = answers[i] as LightMyRequestResponse;
      expect(res.statusCode).toBe(200);
      expectRateHeaders(res, 3, remaining);
      expect(res.headers['retry-after']).toBeUndefined();
    });
    expect429(answers[3] as LightMyRequestResponse);
  });

  it('limits error answers too (a 404 of an authenticated caller counts and carries the headers)', async () => {
    const missing = '/v1/api-keys/00000000-0000-7000-8000-000000000000';
    const answers = await quickly(async () => {
      const key = await keyWithScopes(ctx, tenant.tenantId, ['manage:api-keys']);
      return sequence(4, () => call(ctx.app, 'DELETE', missing, { key }));
    });
    for (const res of answers.slice(0, 3)) {
      expect(res.statusCode).toBe(404);
      expectRateHeaders(res, 3);
    }
    expect429(answers[3] as LightMyRequestResponse);
  });

  it('buckets are per key: another key of the same tenant is unaffected', async () => {
    const { answers, other } = await quickly(async () => {
      const a = await keyWithScopes(ctx, tenant.tenantId, ['manage:api-keys']);
      const b = await keyWithScopes(ctx, tenant.tenantId, ['manage:api-keys']);
      return { answers: await sequence(4, () => list(ctx, a)), other: await list(ctx, b) };
    });
    expect(answers.slice(0, 3).map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect429(answers[3] as LightMyRequestResponse);
    expect(other.statusCode).toBe(200);
    expectRateHeaders(other, 3, 2);
  });

  it('tokens refill at RPS: after Retry-After seconds the key works again', async () => {
    const { key, denied } = await quickly(async () => {
      const k = await keyWithScopes(ctx, tenant.tenantId, ['manage:api-keys']);
      const answers = await sequence(4, () => list(ctx, k));
      return { key: k, denied: answers[3] as LightMyRequestResponse };
    });
    expect(denied.statusCode).toBe(429);
    await new Promise((r) => setTimeout(r, Number(denied.headers['retry-after']) * 1000 + 50));
    expect((await list(ctx, key)).statusCode).toBe(200);
  });

  it('unauthenticated and public requests carry no RateLimit headers and are not limited per key', async () => {
    const noToken = await call(ctx.app, 'GET', '/v1/api-keys');
    expect(noToken.statusCode).toBe(401);
    expect(noToken.headers['ratelimit-limit']).toBeUndefined();
    for (let i = 0; i < 5; i++) expect((await ctx.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });

  it('a per-tenant override (tenants.rate_limit_*) raises the limit for that tenant', async () => {
    const t = await createTenant(ctx);
    await ctx.c.database.db
      .updateTable('tenants')
      .set({ rate_limit_rps: 1, rate_limit_burst: 6 })
      .where('id', '=', t.tenantId)
      .execute();
    const answers = await quickly(async () => {
      const key = await keyWithScopes(ctx, t.tenantId, ['manage:api-keys']);
      return sequence(7, () => list(ctx, key));
    });
    answers.slice(0, 6).forEach((res, i) => {
      expect(res.statusCode, `request ${i + 1}`).toBe(200);
      expect(res.headers['ratelimit-limit']).toBe('6');
    });
    expectError(answers[6] as LightMyRequestResponse, 429, 'rate_limited');
  });
});

/** `keys` keys of a fresh tenant; requests go round-robin over them. */
async function tenantWithKeys(ctx: TestContext, keys: number) {
  const t = await createTenant(ctx);
  const list: string[] = [];
  for (let i = 0; i < keys; i++) list.push(await keyWithScopes(ctx, t.tenantId, ['manage:api-keys']));
  return { tenantId: t.tenantId, keys: list };
}

describe('token bucket per tenant (keys: RPS=1 BURST=3; tenant: RPS=1 BURST=5)', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ env: TENANT_LIMITED });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('more keys do not multiply the limit: the 6th quick request of the tenant is 429, whichever key sends it', async () => {
    const { answers, otherTenant } = await quickly(async () => {
      const t = await tenantWithKeys(ctx, 3);
      const answers = await sequence(
        6,
        (() => {
          let i = 0;
          return () => list(ctx, t.keys[i++ % 3] as string);
        })(),
      );
      const other = await tenantWithKeys(ctx, 1);
      return { answers, otherTenant: await list(ctx, other.keys[0] as string) };
    });
    expect(answers.slice(0, 5).map((r) => r.statusCode)).toEqual(Array(5).fill(200));
    // The headers describe the tighter bucket: first the key's (2 of 3 left, tenant 4 of 5),
    // then the tenant's (key b: 1 of 3 left, tenant: 0 of 5).
    expectRateHeaders(answers[0] as LightMyRequestResponse, 3, 2);
    expectRateHeaders(answers[4] as LightMyRequestResponse, 5, 0);
    const refused = answers[5] as LightMyRequestResponse;
    expectError(refused, 429, 'rate_limited');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expectRateHeaders(refused, 5, 0);
    // Another tenant has its own budget.
    expect(otherTenant.statusCode).toBe(200);
    expectRateHeaders(otherTenant, 3, 2);
  });

  it("a key past its own limit does not use up its tenant's budget for the other keys", async () => {
    const { flood, other } = await quickly(async () => {
      const t = await tenantWithKeys(ctx, 2);
      const flood = await sequence(6, () => list(ctx, t.keys[0] as string));
      return { flood, other: await sequence(3, () => list(ctx, t.keys[1] as string)) };
    });
    expect(flood.map((r) => r.statusCode)).toEqual([200, 200, 200, 429, 429, 429]);
    // 3 of the tenant's 5 were used: key b gets 2, then the tenant is out.
    expect(other.map((r) => r.statusCode)).toEqual([200, 200, 429]);
  });

  it('the tenant limit is set per tenant (postyard tenants set-limits), and back to the default', async () => {
    const answers = await quickly(async () => {
      const t = await tenantWithKeys(ctx, 3);
      await setTenantRateLimits(ctx.c.database, t.tenantId, { tenantRps: 1, tenantBurst: 8 });
      let i = 0;
      return sequence(9, () => list(ctx, t.keys[i++ % 3] as string));
    });
    expect(answers.slice(0, 8).map((r) => r.statusCode)).toEqual(Array(8).fill(200));
    expectError(answers[8] as LightMyRequestResponse, 429, 'rate_limited');
    expectRateHeaders(answers[8] as LightMyRequestResponse, 8, 0);

    const t = await tenantWithKeys(ctx, 1);
    const row = await setTenantRateLimits(ctx.c.database, t.tenantId, { tenantRps: 5, tenantBurst: 9 });
    expect([row.tenant_rate_limit_rps, row.tenant_rate_limit_burst]).toEqual([5, 9]);
    const back = await setTenantRateLimits(ctx.c.database, t.tenantId, { tenantRps: null, tenantBurst: null });
    expect([back.tenant_rate_limit_rps, back.tenant_rate_limit_burst]).toEqual([null, null]);
    await expect(setTenantRateLimits(ctx.c.database, t.tenantId, { tenantRps: -1 })).rejects.toThrow(/tenantRps/);
  });
});

describe('postyard tenants set-limits', () => {
  let ctx: TestContext;
  let env: Record<string, string>;
  beforeAll(async () => {
    ctx = await createTestContext({ env: TENANT_LIMITED });
    env = { POSTYARD_DATA_DIR: ctx.dataDir };
    if (TEST_DATABASE_URL && ctx.pgSchema) {
      const url = new URL(TEST_DATABASE_URL);
      url.searchParams.set('options', `-c search_path=${ctx.pgSchema}`);
      env.DATABASE_URL = url.toString();
    }
  });
  afterAll(async () => {
    killChildren();
    await ctx?.close();
  });

  it(
    'sets the per-key and per-tenant limits of a tenant; "default" goes back to the configuration',
    async () => {
      const t = await createTenant(ctx);
      const args = ['tenants', 'set-limits', '--tenant', t.tenantId, '--json'];
      const set = await runCli([...args, '--key-rps', '50', '--tenant-rps', '7', '--tenant-burst', '9'], { env });
      expect(set.code, set.stderr).toBe(0);
      expect(JSON.parse(set.stdout)).toMatchObject({
        rate_limit_rps: 50,
        rate_limit_burst: null,
        tenant_rate_limit_rps: 7,
        tenant_rate_limit_burst: 9,
      });
      const back = await runCli([...args, '--tenant-burst', 'default'], { env });
      expect(JSON.parse(back.stdout)).toMatchObject({ tenant_rate_limit_rps: 7, tenant_rate_limit_burst: null });
      const bad = await runCli([...args, '--tenant-rps', 'lots'], { env });
      expect(bad.code).not.toBe(0);
      // The app sees the new tenant burst (never cached for this tenant before).
      const key = await keyWithScopes(ctx, t.tenantId, ['manage:api-keys']);
      await setTenantRateLimits(ctx.c.database, t.tenantId, { tenantBurst: 9 });
      const res = await list(ctx, key);
      expect(res.statusCode).toBe(200);
      expectRateHeaders(res, 3, 2); // the key's 3 is tighter than the tenant's 9
    },
    SPAWN_TEST_TIMEOUT_MS,
  );
});

describe.runIf(DIALECT === 'postgres')('per tenant across nodes on PostgreSQL', () => {
  let a: TestContext;
  let b: TestContext;
  beforeAll(async () => {
    a = await createTestContext({ env: TENANT_LIMITED });
    b = await createTestContext({ shareWith: a });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("the tenant's budget holds across nodes: 5 requests with 3 keys on two nodes, the 6th is 429", async () => {
    const answers = await quickly(async () => {
      const t = await tenantWithKeys(a, 3);
      const out: LightMyRequestResponse[] = [];
      for (let i = 0; i < 6; i++) out.push(await list(i % 2 ? b : a, t.keys[i % 3] as string));
      return out;
    });
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 429]);
  });
});

describe('RPS=0 turns rate limiting off', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ env: { POSTYARD_RATE_LIMIT_RPS: '0', POSTYARD_RATE_LIMIT_BURST: '3' } });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('no 429 and no RateLimit headers', async () => {
    const t = await createTenant(ctx);
    for (let i = 0; i < 20; i++) {
      const res = await list(ctx, t.apiKey);
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-limit']).toBeUndefined();
      expect(res.headers['ratelimit-remaining']).toBeUndefined();
      expect(res.headers['ratelimit-reset']).toBeUndefined();
    }
  });
});

describe('the defaults', () => {
  it('are 100 rps and burst 200 (RateLimit-Limit: 200)', async () => {
    const ctx = await createTestContext({
      env: { POSTYARD_RATE_LIMIT_RPS: '100', POSTYARD_RATE_LIMIT_BURST: '200' },
    });
    try {
      expect(ctx.c.config.rateLimitRps).toBe(100);
      // Per tenant: two keys' worth unless set.
      expect([ctx.c.config.tenantRateLimitRps, ctx.c.config.tenantRateLimitBurst]).toEqual([200, 400]);
      const t = await createTenant(ctx);
      const res = await list(ctx, t.apiKey);
      expectRateHeaders(res, 200, 199);
    } finally {
      await ctx.close();
    }
  });
});

/** Two nodes sharing one store: 2 requests on A and 1 on B use the burst; the 4th (on B) is 429. */
async function sharedLimitHolds(a: TestContext, b: TestContext) {
  const t = await createTenant(a);
  const [first, second, third, fourth, fifth] = await quickly(async () => {
    const key = await keyWithScopes(a, t.tenantId, ['manage:api-keys']);
    return [await list(a, key), await list(a, key), await list(b, key), await list(b, key), await list(a, key)];
  });
  expect(first?.statusCode).toBe(200);
  expect(second?.statusCode).toBe(200);
  expect(third?.statusCode).toBe(200);
  expect(third?.headers['ratelimit-remaining']).toBe('0');
  expect429(fourth as LightMyRequestResponse);
  expectError(fifth as LightMyRequestResponse, 429, 'rate_limited');
}

describe.runIf(DIALECT === 'postgres')('across nodes on PostgreSQL (DatabaseStore)', () => {
  let a: TestContext;
  let b: TestContext;
  beforeAll(async () => {
    a = await createTestContext({ env: LIMITED });
    b = await createTestContext({ shareWith: a });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('uses the database store and the limit holds across both nodes', async () => {
    expect(a.c.rateLimiter.kind).toBe('database');
    expect(b.c.rateLimiter.kind).toBe('database');
    await sharedLimitHolds(a, b);
  });

  it('concurrent requests on two nodes never exceed the burst', async () => {
    const t = await createTenant(a);
    const results = await quickly(async () => {
      const key = await keyWithScopes(a, t.tenantId, ['manage:api-keys']);
      return Promise.all(Array.from({ length: 10 }, (_, i) => list(i % 2 ? a : b, key)));
    });
    expect(results.filter((r) => r.statusCode === 200).length).toBe(3);
    expect(results.filter((r) => r.statusCode === 429).length).toBe(7);
  });
});

describe.runIf(DIALECT === 'sqlite')('single node on SQLite', () => {
  it('uses the in-memory store when no Redis is configured', async () => {
    const ctx = await createTestContext({ env: LIMITED });
    try {
      expect(ctx.c.rateLimiter.kind).toBe('memory');
    } finally {
      await ctx.close();
    }
  });
});

describe('across nodes with Redis (REDIS_URL)', async () => {
  const reachable = await redisReachable(REDIS_URL);
  if (!reachable && process.env.CI) throw new Error(`Redis is required in CI but not reachable at ${REDIS_URL}`);

  describe.runIf(reachable)(`RedisStore at ${REDIS_URL}`, () => {
    let a: TestContext;
    let b: TestContext;
    beforeAll(async () => {
      a = await createTestContext({ env: { ...LIMITED, REDIS_URL } });
      b = await createTestContext({ shareWith: a });
    });
    afterAll(async () => {
      await b?.close();
      await a?.close();
    });

    it('both nodes use Redis and share one limit', async () => {
      expect(a.c.rateLimiter.kind).toBe('redis');
      expect(b.c.rateLimiter.kind).toBe('redis');
      await sharedLimitHolds(a, b);
    });

    it('keeps its bucket keys under the postyard: prefix with an expiry', async () => {
      const t = await createTenant(a);
      const key = await keyWithScopes(a, t.tenantId, ['manage:api-keys']);
      const auth = await a.c.apiKeys.authenticate(key);
      expect((await list(a, key)).statusCode).toBe(200);
      const redis = new Redis(REDIS_URL, { lazyConnect: true });
      try {
        await redis.connect();
        const ttl = await redis.pttl(`postyard:rl:${auth?.keyId}`);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(5000);
      } finally {
        redis.disconnect();
      }
    });
  });
});
