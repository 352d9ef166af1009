import { afterAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.ts';

/**
 * POSTYARD_TRUST_PROXY: behind a load balancer every connection comes from the balancer, so
 * per-address limits would lump all clients together. X-Forwarded-For is believed only from a
 * listed proxy; from anyone else it is ignored (a client cannot pick its own address).
 */
const contexts: TestContext[] = [];
afterAll(async () => {
  for (const c of contexts) await c.close();
});

async function context(trust: string | null) {
  const ctx = await createTestContext({
    env: { POSTYARD_AUTH_FAILURES_PER_IP: '3', ...(trust ? { POSTYARD_TRUST_PROXY: trust } : {}) },
  });
  contexts.push(ctx);
  return ctx;
}

/** A request with a wrong API key, from `remote`, claiming to be `forwardedFor`. */
async function badKey(ctx: TestContext, remote: string, forwardedFor: string) {
  const res = await ctx.app.inject({
    method: 'GET',
    url: '/v1/api-keys',
    remoteAddress: remote,
    headers: { authorization: `Bearer pyk_${'x'.repeat(44)}`, 'x-forwarded-for': forwardedFor },
  });
  return res.statusCode;
}

/** Spends one address's failed-auth budget: wrong keys until the answer is 429. */
async function exhaust(ctx: TestContext, remote: string, forwardedFor: string) {
  const seen: number[] = [];
  for (let i = 0; i < 10 && seen.at(-1) !== 429; i++) seen.push(await badKey(ctx, remote, forwardedFor));
  expect(seen.at(-1)).toBe(429);
  expect(seen.slice(0, -1).every((s) => s === 401)).toBe(true);
}

describe('POSTYARD_TRUST_PROXY', () => {
  it('from a listed proxy, each forwarded client has its own budget', async () => {
    const ctx = await context('127.0.0.1,10.0.0.0/8');
    await exhaust(ctx, '10.1.2.3', '203.0.113.1');
    expect(await badKey(ctx, '10.1.2.3', '203.0.113.2')).toBe(401);
    expect(await badKey(ctx, '127.0.0.1', '203.0.113.1')).toBe(429);
  });

  it('from anyone else, X-Forwarded-For is ignored', async () => {
    const ctx = await context('127.0.0.1');
    await exhaust(ctx, '192.0.2.50', '203.0.113.1');
    // Claiming another address does not escape the budget of the real one.
    expect(await badKey(ctx, '192.0.2.50', '203.0.113.99')).toBe(429);
  });

  it('unset: no proxy is trusted', async () => {
    const ctx = await context(null);
    await exhaust(ctx, '127.0.0.1', '203.0.113.1');
    expect(await badKey(ctx, '127.0.0.1', '203.0.113.2')).toBe(429);
  });
});
