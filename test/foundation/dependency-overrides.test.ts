import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';

/**
 * package.json `overrides` light-my-request's `cookie` to 1.x: cookie 2 declares engines
 * node >= 22 (EBADENGINE on every install on Node 20). light-my-request (Fastify's inject, loaded
 * with every Fastify app) uses one function of it, stringifySetCookie({ name, value }), for the
 * `cookies` option of inject; cookie 1.1 has the same function. These check the override is in
 * force and that inject's cookies still arrive as a Cookie header, encoded.
 */
const requireFromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'));
const lmrDir = dirname(requireFromFastify.resolve('light-my-request/package.json'));
const requireFromLmr = createRequire(join(lmrDir, 'index.js'));

describe('dependency overrides', () => {
  it('light-my-request gets a cookie release that supports Node 20', () => {
    const pkg = JSON.parse(readFileSync(requireFromLmr.resolve('cookie/package.json'), 'utf8')) as {
      version: string;
      engines?: { node?: string };
    };
    expect(pkg.version).toMatch(/^1\./);
    expect(pkg.engines?.node).toBe('>=18');
  });

  it("inject's cookies option still sends the cookies, encoded", async () => {
    const app = Fastify();
    app.get('/echo', async (req) => ({ cookie: req.headers.cookie ?? null }));
    try {
      const res = await app.inject({ method: 'GET', url: '/echo', cookies: { session: 'a b;c', other: 'x' } });
      expect(res.json()).toEqual({ cookie: 'session=a%20b%3Bc; other=x' });
    } finally {
      await app.close();
    }
  });
});
