/**
 * HTTP conventions of docs/api.md "Conventions" and the endpoints of README.md "Operations endpoints":
 * X-Request-ID, the error body for every error, 404/405/413/415/400/422, logs, health, metrics.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../../src/app.ts';
import { createMetricsRegistry } from '../../src/metrics/registry.ts';
import { createLogger } from '../../src/logger.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function noStack(res: LightMyRequestResponse) {
  expect(res.body).not.toMatch(/\bat .*\.(ts|js):\d+|"stack"|node_modules|\/src\//);
}

let ctx: TestContext;
let tenant: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  tenant = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

describe('X-Request-ID', () => {
  const valid = ['abc', 'A-b_c.9', 'x'.repeat(128), '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'];
  const invalid = ['x'.repeat(129), 'a b', 'a/b', '<script>', 'café', 'a,b', 'a;b'];

  it.each(valid)('echoes a valid caller value (%s) on success and on errors', async (id) => {
    const ok = await call(ctx.app, 'GET', '/v1/api-keys', { key: tenant.apiKey, headers: { 'x-request-id': id } });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-request-id']).toBe(id);
    const unauthorized = await call(ctx.app, 'GET', '/v1/api-keys', { headers: { 'x-request-id': id } });
    expect(unauthorized.statusCode).toBe(401);
    expect(unauthorized.headers['x-request-id']).toBe(id);
    const notFound = await call(ctx.app, 'GET', '/nowhere', { headers: { 'x-request-id': id } });
    expect(notFound.statusCode).toBe(404);
    expect(notFound.headers['x-request-id']).toBe(id);
    const bad = await call(ctx.app, 'POST', '/v1/api-keys', {
      key: tenant.apiKey,
      body: '{oops',
      headers: { 'x-request-id': id },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['x-request-id']).toBe(id);
  });

  it.each(invalid)('replaces an invalid caller value (%s) by a fresh UUID', async (id) => {
    const ok = await call(ctx.app, 'GET', '/v1/api-keys', { key: tenant.apiKey, headers: { 'x-request-id': id } });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-request-id']).toMatch(UUID);
    const err = await call(ctx.app, 'GET', '/v1/api-keys', { headers: { 'x-request-id': id } });
    expect(err.statusCode).toBe(401);
    expect(err.headers['x-request-id']).toMatch(UUID);
    expect(err.headers['x-request-id']).not.toBe(ok.headers['x-request-id']);
  });

  it('generates a UUID when none is given, different per request, also on public endpoints', async () => {
    const ids = new Set<string>();
    for (const url of ['/healthz', '/readyz', '/metrics', '/v1/openapi.json', '/nowhere']) {
      const res = await ctx.app.inject({ method: 'GET', url });
      expect(res.headers['x-request-id'], url).toMatch(UUID);
      ids.add(String(res.headers['x-request-id']));
    }
    expect(ids.size).toBe(5);
  });
});

describe('structured logs', () => {
  let app: App;
  const lines: string[] = [];

  beforeAll(async () => {
    // The same container with a logger writing into `lines` (and its own metrics registry).
    const logger = createLogger('info', { write: (s: string) => void lines.push(s) });
    app = await buildApp({ ...ctx.c, logger, metrics: createMetricsRegistry(ctx.c.database) });
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('log the request id of every request and never the Authorization header value', async () => {
    const key = tenant.apiKey;
    const ok = await call(app, 'GET', '/v1/api-keys', { key, headers: { 'x-request-id': 'log-ok-1' } });
    expect(ok.statusCode).toBe(200);
    const created = await call(app, 'POST', '/v1/api-keys', {
      key,
      body: { name: 'logged', scopes: ['read:events'] },
      headers: { 'x-request-id': 'log-create-1' },
    });
    expect(created.statusCode).toBe(201);
    const secret = (created.json() as { key: string }).key;
    const denied = await call(app, 'GET', '/v1/api-keys', { key: secret, headers: { 'x-request-id': 'log-denied-1' } });
    expect(denied.statusCode).toBe(403);
    const bad = await call(app, 'GET', '/v1/api-keys', { key: `${key}x`, headers: { 'x-request-id': 'log-bad-1' } });
    expect(bad.statusCode).toBe(401);
    const generated = await call(app, 'GET', '/nowhere', { key });
    expect(generated.statusCode).toBe(404);

    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const id of [
      'log-ok-1',
      'log-create-1',
      'log-denied-1',
      'log-bad-1',
      String(generated.headers['x-request-id']),
    ]) {
      const line = parsed.find((p) => p.reqId === id);
      expect(line, `a log line with reqId ${id}`).toBeDefined();
      expect(line?.level).toBe(30);
      expect(typeof line?.status).toBe('number');
    }
    const all = lines.join('\n');
    expect(all).not.toContain(key);
    expect(all).not.toContain(key.slice(4));
    expect(all).not.toContain(secret);
    expect(all).not.toContain(secret.slice(4));
  });
});

describe('unknown routes and methods', () => {
  it('an unknown route is 404 not_found, with or without a token', async () => {
    for (const url of ['/nowhere', '/v1/nowhere', '/v1/api-keys/1/2/3', '/v2/api-keys']) {
      expectError(await call(ctx.app, 'GET', url), 404, 'not_found');
      expectError(await call(ctx.app, 'GET', url, { key: tenant.apiKey }), 404, 'not_found');
    }
  });

  it('a known path with a wrong method is 405 method_not_allowed with an Allow header', async () => {
    const res = await call(ctx.app, 'PUT', '/v1/api-keys', { key: tenant.apiKey, body: {} });
    expectError(res, 405, 'method_not_allowed');
    const allow = String(res.headers.allow)
      .split(',')
      .map((s) => s.trim());
    expect(allow).toEqual(expect.arrayContaining(['GET', 'POST']));
    const byId = await call(ctx.app, 'PATCH', '/v1/api-keys/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', { body: {} });
    expectError(byId, 405, 'method_not_allowed');
    expect(String(byId.headers.allow)).toContain('DELETE');
    noStack(byId);
  });
});

describe('URLs the router itself refuses', () => {
  // Fastify answers these before any hook runs, with its own body, unless `frameworkErrors` is set.
  const cases: [string, string][] = [
    ['a malformed percent-encoding', '/v1/api-keys/%E0%A4%A'],
    ['a malformed percent-encoding in an unknown path', '/v1/%zz'],
    ['a path parameter over the router limit', `/v1/api-keys/${'x'.repeat(300)}`],
  ];

  it.each(cases)('%s: the contract error body and an X-Request-ID', async (_name, url) => {
    const res = await ctx.app.inject({
      method: 'DELETE',
      url,
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'x-request-id': 'bad-url-1' },
    });
    expect([400, 404]).toContain(res.statusCode);
    const body = expectError(res, res.statusCode, res.statusCode === 404 ? 'not_found' : 'invalid_parameter');
    expect(body).not.toHaveProperty('statusCode');
    expect(res.headers['x-request-id']).toBe('bad-url-1');
    noStack(res);
  });
});

describe('request bodies', () => {
  const goodBody = { name: 'k', scopes: ['read:events'] };

  it('415 unsupported_media_type for text/plain, other types and a missing Content-Type on POST', async () => {
    for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded', 'text/json']) {
      const res = await call(ctx.app, 'POST', '/v1/api-keys', {
        key: tenant.apiKey,
        body: JSON.stringify(goodBody),
        headers: { 'content-type': type },
      });
      expectError(res, 415, 'unsupported_media_type');
      noStack(res);
    }
    const missing = await ctx.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: { authorization: `Bearer ${tenant.apiKey}` },
      // A Buffer payload: light-my-request adds no Content-Type of its own.
      payload: Buffer.from(JSON.stringify(goodBody)),
    });
    expectError(missing, 415, 'unsupported_media_type');
    const empty = await ctx.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: { authorization: `Bearer ${tenant.apiKey}` },
    });
    expectError(empty, 415, 'unsupported_media_type');
  });

  it('accepts application/json with a charset parameter', async () => {
    const res = await call(ctx.app, 'POST', '/v1/api-keys', {
      key: tenant.apiKey,
      body: JSON.stringify(goodBody),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  });

  it('400 invalid_json for malformed JSON and an empty JSON body', async () => {
    for (const body of ['{oops', '{"name": "a",}', '[1,2', 'nul', '\u0000']) {
      const res = await call(ctx.app, 'POST', '/v1/api-keys', { key: tenant.apiKey, body });
      expectError(res, 400, 'invalid_json');
      noStack(res);
    }
    const empty = await ctx.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      payload: '',
    });
    expectError(empty, 400, 'invalid_json');
  });

  it('400 for __proto__ and constructor.prototype in a body (prototype poisoning)', async () => {
    for (const body of [
      '{"name":"a","scopes":["read:events"],"__proto__":{"isAdmin":true}}',
      '{"name":"a","scopes":["read:events"],"constructor":{"prototype":{"isAdmin":true}}}',
    ]) {
      const res = await call(ctx.app, 'POST', '/v1/api-keys', { key: tenant.apiKey, body });
      expect(res.statusCode, res.body).toBe(400);
      expectError(res, 400, 'invalid_json');
      noStack(res);
    }
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('422 validation_failed with one entry per bad field, each naming the field', async () => {
    const res = await call(ctx.app, 'POST', '/v1/api-keys', {
      key: tenant.apiKey,
      body: { name: '', scopes: ['read:events', 'fly:planes'], colour: 'red' },
    });
    const body = expectError(res, 422, 'validation_failed');
    const entries = body.errors as { code: string; message: string; field?: string }[];
    for (const e of entries) {
      expect(e.code).toBe('validation_failed');
      expect(typeof e.field).toBe('string');
      expect(e.message.length).toBeGreaterThan(0);
    }
    expect(entries.map((e) => e.field)).toEqual(expect.arrayContaining(['name', 'scopes[1]', 'colour']));
    noStack(res);
  });

  it('422 for wrong types: strings are not coerced in bodies', async () => {
    const res = await call(ctx.app, 'POST', '/v1/api-keys', {
      key: tenant.apiKey,
      body: { name: 5, scopes: 'read:events' },
    });
    const body = expectError(res, 422, 'validation_failed');
    expect(body.errors.map((e: { field?: string }) => e.field)).toEqual(expect.arrayContaining(['name', 'scopes']));
    const notObject = await call(ctx.app, 'POST', '/v1/api-keys', { key: tenant.apiKey, body: '[1]' });
    expectError(notObject, 422, 'validation_failed');
  });

  it('400 invalid_parameter for a bad query parameter, naming it', async () => {
    const res = await call(ctx.app, 'GET', '/v1/api-keys', { key: tenant.apiKey, query: { limit: 'abc' } });
    const body = expectError(res, 400, 'invalid_parameter');
    expect((body.errors[0] as { field?: string }).field).toBe('limit');
  });

  describe('body limit (POSTYARD_BODY_LIMIT_MB=1)', () => {
    let small: TestContext;
    let t: TestTenant;
    beforeAll(async () => {
      small = await createTestContext({ env: { POSTYARD_BODY_LIMIT_MB: '1' } });
      t = await createTenant(small);
    });
    afterAll(async () => {
      await small?.close();
    });

    it('413 payload_too_large above 1 MB, accepted below', async () => {
      const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10), scopes: ['read:events'] });
      const res = await call(small.app, 'POST', '/v1/api-keys', { key: t.apiKey, body: big });
      expectError(res, 413, 'payload_too_large');
      noStack(res);
      // Under the limit the body is parsed and validated (name too long: 422, not 413).
      const under = JSON.stringify({ name: 'x'.repeat(1000 * 1000), scopes: ['read:events'] });
      expectError(
        await call(small.app, 'POST', '/v1/api-keys', { key: t.apiKey, body: under }),
        422,
        'validation_failed',
      );
    });

    it('an unauthenticated oversized body is refused with 401 before it is read', async () => {
      const big = JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024), scopes: ['read:events'] });
      expectError(await call(small.app, 'POST', '/v1/api-keys', { body: big }), 401, 'unauthorized');
    });
  });
});

describe('operational endpoints', () => {
  it('/healthz, /readyz, /metrics and /v1/openapi.json need no token', async () => {
    const health = await ctx.app.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toEqual({ status: 'ok' });
    const ready = await ctx.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    const metrics = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toMatch(/^text\/plain/);
    const openapi = await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(openapi.statusCode).toBe(200);
    // A bogus token does not turn public endpoints into 401s either.
    const withBadToken = await ctx.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { authorization: 'Bearer nope' },
    });
    expect(withBadToken.statusCode).toBe(200);
  });

  it('/metrics counts requests by method, route pattern and status, with a latency histogram', async () => {
    const created = await call(ctx.app, 'POST', '/v1/api-keys', {
      key: tenant.apiKey,
      body: { name: 'to-delete', scopes: ['read:events'] },
    });
    const id = (created.json() as { id: string }).id;
    expect((await call(ctx.app, 'DELETE', `/v1/api-keys/${id}`, { key: tenant.apiKey })).statusCode).toBe(204);
    expect((await call(ctx.app, 'DELETE', `/v1/api-keys/${id}`, { key: tenant.apiKey })).statusCode).toBe(404);
    await call(ctx.app, 'GET', `/no/such/route/${id}`);

    const text = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    const counter = (route: string, status: number, method: string) =>
      new RegExp(
        `^postyard_http_requests_total\\{(?=[^}]*method="${method}")(?=[^}]*route="${route.replace(/[/.]/g, '\\$&')}")(?=[^}]*status_code="${status}")[^}]*\\} (\\d+)`,
        'm',
      );
    expect(text).toMatch(counter('/v1/api-keys/:id', 204, 'DELETE'));
    expect(text).toMatch(counter('/v1/api-keys/:id', 404, 'DELETE'));
    expect(text).toMatch(counter('/v1/api-keys', 201, 'POST'));
    expect(text).toMatch(/^# TYPE postyard_http_request_duration_seconds histogram$/m);
    expect(text).toMatch(
      /^postyard_http_request_duration_seconds_bucket\{[^}]*route="\/v1\/api-keys\/:id"[^}]*\} \d+/m,
    );
    expect(text).toMatch(/^postyard_http_request_duration_seconds_count\{[^}]*\} \d+/m);
    // Raw ids never become label values (cardinality), and no tenant data leaks.
    expect(text).not.toContain(id);
    expect(text).not.toContain(tenant.tenantId);
  });

  it('/readyz answers 503 unavailable when the database is unreachable', async () => {
    const broken = await buildApp({
      ...ctx.c,
      metrics: createMetricsRegistry(ctx.c.database),
      database: {
        ...ctx.c.database,
        ping: async () => {
          throw new Error('connection refused');
        },
      },
    });
    try {
      const res = await broken.inject({ method: 'GET', url: '/readyz' });
      expectError(res, 503, 'unavailable');
      noStack(res);
      expect(res.body).not.toContain('connection refused');
      expect((await broken.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await broken.close();
    }
  });
});
