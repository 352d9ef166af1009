/**
 * The OpenAPI document as people and generators use it (issue 20 item 5): operationIds are the
 * client's method names, every operation has tags, a description, the scope it needs, the error
 * codes it can answer, examples that match their schemas and the response headers; webhook
 * payloads are described; Redocly CLI lints it with no error and no warning; /docs serves a
 * reference page that loads it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENDPOINTS } from '@postyard/client';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/modules/events/events.types.ts';
import {
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { fillPath, hasParams, ROUTES, routeName } from '../helpers/route-catalog.ts';
import { bearer, sendRoute } from '../helpers/security-suite.ts';
import { REPO_ROOT } from '../helpers/server-process.ts';

type Json = Record<string, unknown>;
interface Media {
  schema: unknown;
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}
interface Operation {
  operationId?: string;
  tags?: string[];
  description?: string;
  security?: Record<string, string[]>[];
  'x-required-scope'?: string | string[];
  parameters?: { in: string; name: string }[];
  requestBody?: { content: Record<string, Media> };
  responses: Record<
    string,
    { description: string; headers?: Json; content?: Record<string, Media>; 'x-error-codes'?: string[] }
  >;
}
interface Doc {
  info: Json;
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Operation>>;
  webhooks: Record<string, { post: Operation }>;
  components: { schemas: Json };
}

let ctx: TestContext;
let tenant: TestTenant;
let doc: Doc;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);

const toOpenApi = (p: string) => p.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const ptr = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const operations = () =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method, op })),
  );

beforeAll(async () => {
  ctx = await createTestContext();
  tenant = await createTenant(ctx);
  const res = await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  expect(res.statusCode).toBe(200);
  doc = res.json() as Doc;
  ajv.addSchema(doc as unknown as Json, 'openapi.json');
});
afterAll(async () => {
  await ctx?.close();
});

function examplesOf(media: Media): unknown[] {
  if (media.examples) return Object.values(media.examples).map((e) => e.value);
  return media.example === undefined ? [] : [media.example];
}

function expectValid(where: string, pointer: string, value: unknown) {
  const validate = ajv.compile({ $ref: `openapi.json#${pointer}` });
  expect(validate(value), `${where}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

describe('operations', () => {
  it("operationIds are the client's method names (packages/client ENDPOINTS), and unique", () => {
    for (const [name, [method, path]] of Object.entries(ENDPOINTS)) {
      expect(doc.paths[path]?.[method.toLowerCase()]?.operationId, `${method} ${path}`).toBe(name);
    }
    const ids = operations().map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[A-Za-z][A-Za-z0-9._]*$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every operation has declared, described tags and a description', () => {
    const tags = new Map(doc.tags.map((t) => [t.name, t.description]));
    for (const { path, method, op } of operations()) {
      expect(op.tags?.length, `${method} ${path}`).toBeGreaterThan(0);
      for (const t of op.tags ?? []) expect(tags.get(t), `tag ${t}`).toBeTruthy();
      expect(op.description?.length ?? 0, `${method} ${path}`).toBeGreaterThan(10);
    }
  });

  it('names the scope each catalog route needs (x-required-scope and a bearer requirement per scope)', () => {
    for (const route of ROUTES) {
      const op = doc.paths[toOpenApi(route.path)]?.[route.method.toLowerCase()];
      expect(op, routeName(route)).toBeDefined();
      const declared = op?.['x-required-scope'];
      expect([declared].flat().sort(), routeName(route)).toEqual([...route.scopes].sort());
      expect(op?.security, routeName(route)).toEqual(route.scopes.map((s) => ({ bearer: [s] })));
      expect(op?.description, routeName(route)).toContain(`\`${route.scopes[0]}\``);
    }
  });

  it('every request and response body has an example that matches its schema', () => {
    let checked = 0;
    for (const { path, method, op } of operations()) {
      const base = `/paths/${ptr(path)}/${method}`;
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
        const values = examplesOf(media);
        expect(values.length, `${method} ${path} request ${type}`).toBeGreaterThan(0);
        if (type === 'application/json')
          for (const v of values)
            expectValid(`${method} ${path} request`, `${base}/requestBody/content/${ptr(type)}/schema`, v);
        checked++;
      }
      for (const [status, res] of Object.entries(op.responses)) {
        for (const [type, media] of Object.entries(res.content ?? {})) {
          const values = examplesOf(media);
          expect(values.length, `${method} ${path} ${status}`).toBeGreaterThan(0);
          for (const v of values)
            expectValid(`${method} ${path} ${status}`, `${base}/responses/${status}/content/${ptr(type)}/schema`, v);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(200);
  });

  it('documents the response headers: X-Request-ID, RateLimit-*, Retry-After on 429/503/507, Idempotent-Replayed where keyed', () => {
    for (const { path, method, op } of operations()) {
      const keyed = op.parameters?.some((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
      for (const [status, res] of Object.entries(op.responses)) {
        const h = Object.keys(res.headers ?? {});
        const what = `${method} ${path} ${status}`;
        expect(h, what).toContain('X-Request-ID');
        if (status !== '401')
          expect(h, what).toEqual(
            expect.arrayContaining(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']),
          );
        if (status === '429' || status === '503' || status === '507') expect(h, what).toContain('Retry-After');
        if (status.startsWith('2')) expect(h.includes('Idempotent-Replayed'), what).toBe(Boolean(keyed));
      }
    }
  });

  it('each error response lists its error codes, with an example per code', () => {
    for (const { path, method, op } of operations()) {
      for (const [status, res] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        const codes = res['x-error-codes'] ?? [];
        expect(codes.length, `${method} ${path} ${status}`).toBeGreaterThan(0);
        for (const code of codes) expect(res.description).toContain(`\`${code}\``);
        expect(Object.keys(res.content?.['application/json']?.examples ?? {}).sort()).toEqual([...codes].sort());
      }
    }
  });

  it('tells the truth: the error codes real answers carry are the documented ones for their status', async () => {
    const events = await keyWithScopes(ctx, tenant.tenantId, ['read:events']);
    const suppressions = await keyWithScopes(ctx, tenant.tenantId, ['manage:suppressions']);
    for (const route of ROUTES) {
      const ids = hasParams(route.path) && route.makeId ? await route.makeId(ctx, tenant) : undefined;
      const op = doc.paths[toOpenApi(route.path)]?.[route.method.toLowerCase()];
      const unscoped = route.scopes.includes('read:events') ? suppressions : events;
      const answers = [
        await sendRoute(ctx, route, { authorization: null, ...(ids ? { ids } : {}) }),
        await sendRoute(ctx, route, { authorization: bearer(tenant.apiKey), ...(ids ? { ids: 'no-such-id' } : {}) }),
        await sendRoute(ctx, route, { authorization: bearer(unscoped), ...(ids ? { ids } : {}) }),
      ];
      for (const res of answers) {
        if (res.statusCode < 400) continue;
        const what = `${routeName(route)} -> ${res.statusCode} (${fillPath(route.path, ids ?? 'x')})`;
        const documented = op?.responses[String(res.statusCode)]?.['x-error-codes'] ?? [];
        for (const e of (res.json() as { errors: { code: string }[] }).errors)
          expect(documented, what).toContain(e.code);
      }
    }
  });
});

describe('webhooks', () => {
  it('describes the POST of every event type, with examples valid against the Event schema', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      const post = doc.webhooks[type]?.post;
      const headers = (post?.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name);
      expect(headers).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
      const media = post?.requestBody?.content['application/json'] as Media;
      const [single, batch] = examplesOf(media) as [Json, { events: Json[] }];
      expect(single.type).toBe(type);
      expectValid(type, '/components/schemas/Event', single);
      const schema = `/webhooks/${ptr(type)}/post/requestBody/content/${ptr('application/json')}/schema`;
      expectValid(`${type} single`, schema, single);
      expectValid(`${type} batch`, schema, batch);
      // The schema of one type refuses an event of another type.
      const other = EVENT_TYPES.find((t) => t !== type) as string;
      expect(ajv.validate({ $ref: `openapi.json#${schema}` }, { ...single, type: other }), type).toBe(false);
    }
  });
});

describe('Redocly CLI lint', () => {
  it('passes with no error and no warning (redocly.yaml: recommended-strict and more)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-redocly-'));
    try {
      const file = join(dir, 'openapi.json');
      writeFileSync(file, JSON.stringify(doc));
      const bin = join(REPO_ROOT, 'node_modules', '.bin', 'redocly');
      const run = spawnSync(bin, ['lint', '--config', join(REPO_ROOT, 'redocly.yaml'), '--format', 'summary', file], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
        timeout: 120_000,
      });
      const out = `${run.stdout}\n${run.stderr}`;
      expect(run.status, out).toBe(0);
      expect(out).toContain('Your API description is valid');
      expect(out).not.toMatch(/warning|error\s/i);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);
});

describe('/docs', () => {
  it('serves a reference page (own CSP, no token) that loads /v1/openapi.json', async () => {
    const page = await ctx.app.inject({ method: 'GET', url: '/docs/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('swagger-ui');
    expect(page.headers['content-security-policy']).toMatch(/default-src 'self'/);
    expect(page.headers['content-security-policy']).toMatch(/object-src 'none'/);
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    // Everything it loads is served here: no other origin in the page.
    expect(page.body).not.toMatch(/(src|href)="https?:\/\//);
    const init = await ctx.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    expect(init.statusCode).toBe(200);
    expect(init.body).toContain('"/v1/openapi.json"');
    const bundle = await ctx.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
    const bare = await ctx.app.inject({ method: 'GET', url: '/docs' });
    expect([200, 302]).toContain(bare.statusCode);
  });

  it('is not part of the API description', () => {
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/docs'))).toEqual([]);
  });
});
