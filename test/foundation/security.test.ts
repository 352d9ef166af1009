import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.ts';
import { CATALOG_FILES, openApiToFastify, PUBLIC_V1_ROUTES, ROUTES, routeName } from '../helpers/route-catalog.ts';
import { defineCrossNodeRevocation, defineSecuritySuite } from '../helpers/security-suite.ts';

defineSecuritySuite(ROUTES);
defineCrossNodeRevocation();

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];

/** Routes Fastify itself knows, read from its route tree (catches routes hidden from OpenAPI). */
function routesFromTree(tree: string): { method: string; path: string }[] {
  // printRoutes({ commonPrefix: false }) prints one node per line: "<branches><segment> (<METHODS>)",
  // nested under its parent by indentation of 4 characters per level.
  const out: { method: string; path: string }[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:[│ ] {3})*)(?:[├└]── )(.*?)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] ?? '').length / 4;
    stack.length = depth;
    stack.push(m[2] ?? '');
    const path = stack.join('');
    for (const method of (m[3] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      out.push({ method, path: path.replace(/^\/\//, '/') });
    }
  }
  return out;
}

describe('route catalog coverage', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('lists every /v1 path and method of the OpenAPI document', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { paths: Record<string, Record<string, unknown>> };
    const documented: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      if (!path.startsWith('/v1/')) continue;
      for (const method of Object.keys(item)) {
        if (HTTP_METHODS.includes(method)) documented.push(`${method.toUpperCase()} ${openApiToFastify(path)}`);
      }
    }
    const catalog = ROUTES.map(routeName);
    const missing = documented.filter((r) => !catalog.includes(r));
    expect(missing, `routes missing from the route catalog (${CATALOG_FILES})`).toEqual([]);
    expect(documented.length).toBeGreaterThanOrEqual(catalog.length);
  });

  it('lists every /v1 route Fastify serves, including ones hidden from OpenAPI', () => {
    const served = routesFromTree(ctx.app.printRoutes({ commonPrefix: false }))
      .filter((r) => r.path.startsWith('/v1/') && r.method !== 'HEAD' && r.method !== 'OPTIONS')
      .map((r) => `${r.method} ${r.path}`);
    expect(served.length).toBeGreaterThan(0);
    const known = [...ROUTES.map(routeName), ...PUBLIC_V1_ROUTES.map(routeName)];
    expect(
      served.filter((r) => !known.includes(r)),
      `routes missing from ${CATALOG_FILES}`,
    ).toEqual([]);
  });

  it('has no stale entries: every catalog route exists', () => {
    for (const r of ROUTES) expect(ctx.app.hasRoute({ method: r.method, url: r.path }), routeName(r)).toBe(true);
  });

  it('has no duplicate entries', () => {
    const names = ROUTES.map(routeName);
    expect(new Set(names).size).toBe(names.length);
  });
});
