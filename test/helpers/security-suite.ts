/**
 * The shared security suite: every route of the catalog gets the same checks (docs/api.md
 * "Authentication and scopes" and "Errors"): no token, malformed or unknown token, a deleted key,
 * a key without the route's scope, and for routes with path parameters another tenant's id. Call `defineSecuritySuite()` inside a
 * test file; it makes its own context (auth cache 0 s so revocation is visible at once).
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.ts';
import { ALL_SCOPES, createTenant, createTestContext, type TestContext, type TestTenant } from './context.ts';
import { fillPath, hasParams, ROUTES, type RouteSpec, routeName } from './route-catalog.ts';

export interface SendOptions {
  /** Full Authorization header value; null sends none. */
  authorization?: string | null;
  /** Path parameter values; default: a random UUID for every parameter. */
  ids?: string | Record<string, string>;
  headers?: Record<string, string>;
}

const NIL_ID = '00000000-0000-7000-8000-000000000000';

/** Sends `route` with its sample body (if any). */
export function sendRoute(ctx: TestContext, route: RouteSpec, opts: SendOptions = {}): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.authorization) headers.authorization = opts.authorization;
  let payload: string | Buffer | undefined;
  if (route.sampleBody !== undefined) {
    if (route.contentType) {
      headers['content-type'] = route.contentType;
      payload = route.sampleBody as string | Buffer;
    } else {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(route.sampleBody);
    }
  }
  return ctx.app.inject({
    method: route.method,
    url: fillPath(route.path, opts.ids ?? NIL_ID),
    headers,
    ...(payload !== undefined ? { payload } : {}),
  });
}

export function bearer(key: string): string {
  return `Bearer ${key}`;
}

export interface ErrorBody {
  errors: { code: string; message: string; field?: string }[];
}

/** Asserts the contract's error body (docs/api.md "Errors") with `status` and first `code`; returns it. */
export function expectError(res: LightMyRequestResponse, status: number, code: string): ErrorBody {
  expect(res.statusCode, `${res.statusCode} ${res.body}`).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json() as ErrorBody;
  expect(Array.isArray(body.errors)).toBe(true);
  expect(body.errors.length).toBeGreaterThan(0);
  expect(body.errors[0]?.code).toBe(code);
  expect(typeof body.errors[0]?.message).toBe('string');
  expect(res.body).not.toMatch(/\n\s+at |stack/i);
  return body;
}

/** Status codes that show the request got past authentication and authorization. */
function expectAuthorized(res: LightMyRequestResponse, what: string) {
  expect([401, 403, 404], `${what}: ${res.statusCode} ${res.body}`).not.toContain(res.statusCode);
  expect(res.statusCode, `${what}: ${res.body}`).toBeLessThan(500);
}

/** A syntactically valid key that was never issued. */
export function unknownKey(): string {
  return `pyk_${randomBase62(44)}`;
}

async function createKeyViaApi(ctx: TestContext, tenant: TestTenant, scopes: string[]) {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/v1/api-keys',
    headers: { authorization: bearer(tenant.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify({ name: 'security-suite', scopes }),
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: string; key: string };
}

async function deleteKeyViaApi(ctx: TestContext, tenant: TestTenant, id: string) {
  const res = await ctx.app.inject({
    method: 'DELETE',
    url: `/v1/api-keys/${id}`,
    headers: { authorization: bearer(tenant.apiKey) },
  });
  expect(res.statusCode, res.body).toBe(204);
}

async function idsFor(ctx: TestContext, route: RouteSpec, tenant: TestTenant) {
  if (!hasParams(route.path)) return undefined;
  if (!route.makeId) throw new Error(`${routeName(route)} has path parameters but no makeId in the route catalog`);
  return route.makeId(ctx, tenant);
}

export function defineSecuritySuite(routes: RouteSpec[] = ROUTES) {
  describe('shared security suite', () => {
    let ctx: TestContext;
    let tenantA: TestTenant;
    let tenantB: TestTenant;

    beforeAll(async () => {
      ctx = await createTestContext({ env: { POSTYARD_AUTH_CACHE_SECONDS: '0' } });
      tenantA = await createTenant(ctx);
      tenantB = await createTenant(ctx);
    });
    afterAll(async () => {
      await ctx?.close();
    });

    it('the catalog is not empty and every parameterized route has makeId', () => {
      expect(routes.length).toBeGreaterThan(0);
      for (const r of routes) {
        if (hasParams(r.path)) expect(r.makeId, routeName(r)).toBeTypeOf('function');
        expect(r.scopes.length, routeName(r)).toBeGreaterThan(0);
      }
    });

    describe.each(routes.map((r) => [routeName(r), r] as const))('%s', (_name, route) => {
      it('without a token: 401 unauthorized with WWW-Authenticate: Bearer', async () => {
        const res = await sendRoute(ctx, route, { authorization: null });
        expectError(res, 401, 'unauthorized');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
        expect(res.headers['x-request-id']).toBeTruthy();
      });

      it('with a malformed or unknown token: 401', async () => {
        const valid = tenantA.apiKey;
        const headers = [
          'Bearer',
          'Bearer ',
          `Basic ${Buffer.from('user:pass').toString('base64')}`,
          `Token ${valid}`,
          `Bearer ${valid} extra`,
          `Bearer ${valid.slice(4)}`, // without the pyk_ prefix
          `Bearer ${valid.slice(0, -1)}`, // truncated
          `Bearer ${valid.slice(0, -1)}${valid.endsWith('A') ? 'B' : 'A'}`, // one char changed
          `Bearer pyk_short`,
          `Bearer ${unknownKey()}`,
          `Bearer sk_${randomBase62(44)}`,
        ];
        for (const authorization of headers) {
          const res = await sendRoute(ctx, route, { authorization });
          expect(res.statusCode, `Authorization: ${authorization}`).toBe(401);
          expectError(res, 401, 'unauthorized');
          expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
        }
      });

      it('with a deleted key: 401', async () => {
        const k = await createKeyViaApi(ctx, tenantA, ALL_SCOPES);
        const before = await sendRoute(ctx, route, {
          authorization: bearer(k.key),
          ids: (await idsFor(ctx, route, tenantA)) ?? NIL_ID,
        });
        expectAuthorized(before, 'the key before deletion');
        await deleteKeyViaApi(ctx, tenantA, k.id);
        const after = await sendRoute(ctx, route, {
          authorization: bearer(k.key),
          ids: (await idsFor(ctx, route, tenantA)) ?? NIL_ID,
        });
        expectError(after, 401, 'unauthorized');
        expect(after.headers['www-authenticate']).toMatch(/^Bearer/);
      });

      it("with a key lacking the route's scope: 403 insufficient_scope naming the scope", async () => {
        const others = ALL_SCOPES.filter((s) => !route.scopes.includes(s));
        const key = (await createKeyViaApi(ctx, tenantA, others)).key;
        const res = await sendRoute(ctx, route, {
          authorization: bearer(key),
          ids: (await idsFor(ctx, route, tenantA)) ?? NIL_ID,
        });
        const body = expectError(res, 403, 'insufficient_scope');
        expect(body.errors[0]?.message).toContain(route.scopes[0]);
      });

      it('with a key holding only the route scope: allowed', async () => {
        for (const scope of route.scopes) {
          const key = (await createKeyViaApi(ctx, tenantA, [scope])).key;
          const res = await sendRoute(ctx, route, {
            authorization: bearer(key),
            ids: (await idsFor(ctx, route, tenantA)) ?? NIL_ID,
          });
          expectAuthorized(res, `a key with only ${scope}`);
        }
      });

      if (hasParams(route.path)) {
        it.skipIf(route.sharedParam)(
          "with another tenant's id: 404 not_found (and the owner gets past 404)",
          async () => {
            const ids = await idsFor(ctx, route, tenantA);
            const foreign = await sendRoute(ctx, route, { authorization: bearer(tenantB.apiKey), ids: ids ?? NIL_ID });
            expectError(foreign, 404, 'not_found');
            // The same request by the owner is not a 404: the id was real, only the tenant differed.
            const own = await sendRoute(ctx, route, { authorization: bearer(tenantA.apiKey), ids: ids ?? NIL_ID });
            expectAuthorized(own, 'the owner');
          },
        );

        it('with an unknown or malformed id: 404 not_found', async () => {
          for (const id of [NIL_ID, 'not-a-uuid', 'x'.repeat(100)]) {
            const res = await sendRoute(ctx, route, { authorization: bearer(tenantA.apiKey), ids: id });
            expectError(res, 404, 'not_found');
          }
        });
      }
    });
  });
}

/**
 * Revocation across nodes: node B keeps the default auth cache (2 s); a key deleted through
 * node A must fail on node B within 5 s (docs/api.md "Authentication and scopes").
 */
export function defineCrossNodeRevocation() {
  describe('revocation across nodes', () => {
    let a: TestContext;
    let b: TestContext;

    beforeAll(async () => {
      a = await createTestContext();
      b = await createTestContext({ shareWith: a });
    });
    afterAll(async () => {
      await b?.close();
      await a?.close();
    });

    it('a key deleted on node A is refused by node B (2 s cache) within 5 s', async () => {
      expect(b.c.config.authCacheSeconds).toBe(2);
      const tenant = await createTenant(a);
      const k = await createKeyViaApi(a, tenant, ['manage:api-keys']);
      const list = { method: 'GET' as const, url: '/v1/api-keys', headers: { authorization: bearer(k.key) } };
      // Node B authenticates the key and caches the answer.
      expect((await b.app.inject(list)).statusCode).toBe(200);
      await deleteKeyViaApi(a, tenant, k.id);
      const deletedAt = Date.now();
      // Node A (the deleting node) refuses at once.
      expect((await a.app.inject(list)).statusCode).toBe(401);
      let status = 200;
      while (Date.now() - deletedAt < 6000) {
        status = (await b.app.inject(list)).statusCode;
        if (status === 401) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const elapsed = Date.now() - deletedAt;
      expect(status).toBe(401);
      expect(elapsed).toBeLessThan(5000);
      // Stays refused.
      expect((await b.app.inject(list)).statusCode).toBe(401);
    });
  });
}
