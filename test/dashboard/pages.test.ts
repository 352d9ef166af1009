/**
 * The dashboard's pages as the server answers them: the single-page app at the contract's paths
 * only, signed-out redirects to /login (no open redirect), strict security headers, cached
 * assets, and a clear 503 page when the build is missing.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDashboardPages } from '../../src/modules/dashboard/pages.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';
import { REPO_ROOT } from '../helpers/server-process.ts';
import { ensureDashboardBuilt } from './browser-helpers.ts';
import { signedInUser } from './helpers.ts';

let ctx: TestContext;
beforeAll(async () => {
  ensureDashboardBuilt();
  ctx = await createTestContext();
}, 120_000);
afterAll(async () => {
  await ctx?.close();
});

const PAGES = [
  '/',
  '/activity',
  '/messages/01a2b3c4-0000-7000-8000-000000000000',
  '/settings/api-keys',
  '/settings/smtp',
  '/settings/webhooks',
  '/suppressions',
  '/domains',
];

describe('pages', () => {
  it('serves the sign-in page to anyone, with strict headers and no caching', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/login' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toContain('<div id="root"></div>');
    expect(res.headers['content-security-policy']).toContain("script-src 'self'");
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('redirects a signed-out visit of every page to /login with the way back', async () => {
    for (const page of PAGES) {
      const res = await ctx.app.inject({ method: 'GET', url: `${page}?x=1` });
      expect(res.statusCode, page).toBe(302);
      expect(res.headers.location).toBe(`/login?next=${encodeURIComponent(page)}`);
    }
  });

  it('serves every page to a signed-in user', async () => {
    const { client } = await signedInUser(ctx);
    for (const page of PAGES) {
      const res = await client.get(page);
      expect(res.statusCode, page).toBe(200);
      expect(res.body).toContain('<div id="root"></div>');
    }
  });

  it('answers 404 for other paths (no catch-all) and keeps /v1 untouched', async () => {
    for (const url of ['/settings', '/admin', '/login/x', '/messages', '/dashboard/api/nope']) {
      const res = await ctx.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().errors[0].code).toBe('not_found');
    }
    expect((await ctx.app.inject({ method: 'GET', url: '/v1/api-keys' })).statusCode).toBe(401);
  });

  it('serves hashed assets with long-lived caching', async () => {
    const assets = readdirSync(join(REPO_ROOT, 'dashboard', 'dist', 'assets'));
    const js = assets.find((f) => f.endsWith('.js'));
    expect(js).toBeDefined();
    const res = await ctx.app.inject({ method: 'GET', url: `/assets/${js}` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/javascript/);
    expect(res.headers['cache-control']).toMatch(/immutable/);
    expect((await ctx.app.inject({ method: 'GET', url: '/assets/../../package.json' })).statusCode).not.toBe(200);
    expect((await ctx.app.inject({ method: 'GET', url: '/assets/missing.js' })).statusCode).toBe(404);
  });

  it('says how to build the dashboard when its files are missing (503), without failing to start', async () => {
    const app = Fastify();
    await registerDashboardPages(app, join(REPO_ROOT, 'dashboard', 'no-such-dist'));
    app.get('/healthz', async () => ({ status: 'ok' }));
    await app.ready();
    const res = await app.inject({ method: 'GET', url: '/login' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toContain('npm run build:dashboard');
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    await app.close();
  });
});
