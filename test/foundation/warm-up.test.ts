import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOT_ROUTES, warmRouteSchemas } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { RenderPool } from '../../src/modules/delivery/render/render-pool.ts';
import { createTenant, createTestContext, DIALECT, type TestContext } from '../helpers/context.ts';

/**
 * A node warms up before it listens (src/roles.ts warmUp): the database pool opened, the render
 * threads started, the hot routes' schemas compiled. Without it the soak's first seconds were
 * 1-3 s at p99 on PostgreSQL (docs/benchmarks.md, soak) while every later window was < 250 ms.
 */
describe('warm-up before listening', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx.close();
  });

  it('every hot route has schemas to compile, found by the name it is served under', () => {
    for (const route of HOT_ROUTES) expect(warmRouteSchemas(ctx.app, [route]), route).toBeGreaterThan(0);
    expect(warmRouteSchemas(ctx.app, ['POST /v1/no-such-route'])).toBe(0);
  });

  it('the warmed accept route still validates: a bad body is a 422, a good one a 202', async () => {
    warmRouteSchemas(ctx.app);
    const { apiKey: key } = await createTenant(ctx);
    const bad = await ctx.app.inject({
      method: 'POST',
      url: '/v1/transmissions',
      headers: { authorization: `Bearer ${key}` },
      payload: { recipients: 'nope' },
    });
    expect(bad.statusCode).toBe(422);
    const good = await ctx.app.inject({
      method: 'POST',
      url: '/v1/transmissions',
      headers: { authorization: `Bearer ${key}` },
      payload: {
        recipients: [{ email: 'ann@example.com' }],
        content: { from: 'sender@example.com', subject: 'Hi', text: 'Hello' },
      },
    });
    expect(good.statusCode, good.body).toBe(202);
  });

  it('the render pool starts every thread and resolves once each has loaded', async () => {
    const pool = new RenderPool(2, createLogger('silent'));
    try {
      expect(pool.readyThreads()).toBe(0);
      await pool.warm();
      expect(pool.readyThreads()).toBe(2);
    } finally {
      await pool.close();
    }
  });

  it.runIf(DIALECT === 'postgres')('PostgreSQL: the whole pool is open after warm()', async () => {
    const size = ctx.c.config.dbPoolSize;
    expect(ctx.c.database.connections()).toBeLessThan(size);
    await ctx.c.database.warm();
    expect(ctx.c.database.connections()).toBe(size);
  });
});
