/** /v1/openapi.json (docs/api.md, introduction): generated from the route schemas, valid OpenAPI 3.1, complete. */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { fillPath, hasParams, ROUTES, routeName } from '../helpers/route-catalog.ts';
import { bearer, sendRoute } from '../helpers/security-suite.ts';

type Operation = {
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  security?: unknown[];
};
type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, unknown>; schemas?: Record<string, unknown> };
  security?: unknown[];
};

/** Fastify `/v1/api-keys/:id` -> OpenAPI `/v1/api-keys/{id}`. */
function toOpenApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** JSON Pointer segment escaping. */
function ptr(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

let ctx: TestContext;
let tenant: TestTenant;
let doc: Doc;

beforeAll(async () => {
  ctx = await createTestContext();
  tenant = await createTenant(ctx);
  const res = await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  doc = res.json() as Doc;
});
afterAll(async () => {
  await ctx?.close();
});

describe('GET /v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    const validator = new Validator();
    const result = await validator.validate(doc as unknown as Record<string, unknown>);
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('needs no token and is the same document on every call (generated once from the schemas)', async () => {
    const again = await ctx.app.inject({
      method: 'GET',
      url: '/v1/openapi.json',
      headers: { authorization: 'Bearer x' },
    });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(doc);
  });

  it('lists every route of the catalog, with its path parameters', () => {
    for (const route of ROUTES) {
      const item = doc.paths[toOpenApiPath(route.path)];
      expect(item, `${routeName(route)} is missing from the OpenAPI document`).toBeDefined();
      const op = item?.[route.method.toLowerCase()];
      expect(op, `${routeName(route)} is missing from the OpenAPI document`).toBeDefined();
      for (const name of [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1])) {
        expect(
          op?.parameters?.some((p) => p.in === 'path' && p.name === name && p.required),
          `${routeName(route)} :${name}`,
        ).toBe(true);
      }
      if (route.sampleBody !== undefined) {
        expect(Object.keys(op?.requestBody?.content ?? {}), routeName(route)).toContain(
          route.contentType ?? 'application/json',
        );
      }
    }
  });

  it('declares bearer auth for every /v1 operation and documents 401, 403 and 429 with the error body', () => {
    expect(doc.components?.securitySchemes?.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearer: [] }]);
    for (const route of ROUTES) {
      const op = doc.paths[toOpenApiPath(route.path)]?.[route.method.toLowerCase()];
      if (!op) continue;
      // An operation-level `security: []` would document the route as public.
      if (op.security) expect(op.security.length, routeName(route)).toBeGreaterThan(0);
      for (const status of ['401', '403', '429']) {
        expect(op.responses[status], `${routeName(route)} documents ${status}`).toBeDefined();
        expect(JSON.stringify(op.responses[status]), `${routeName(route)} ${status}`).toContain('ErrorBody');
      }
    }
  });

  it('does not expose operational or internal routes', () => {
    for (const p of ['/healthz', '/readyz', '/metrics', '/v1/openapi.json']) expect(doc.paths[p], p).toBeUndefined();
  });

  it('tells the truth: real answers of every catalog route match the documented status and schema', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    ajv.addSchema(doc, 'openapi.json');
    for (const route of ROUTES) {
      const ids = hasParams(route.path) && route.makeId ? await route.makeId(ctx, tenant) : undefined;
      const answers = [
        await sendRoute(ctx, route, { authorization: bearer(tenant.apiKey), ...(ids ? { ids } : {}) }),
        await sendRoute(ctx, route, { authorization: null, ...(ids ? { ids } : {}) }),
      ];
      for (const res of answers) {
        const status = String(res.statusCode);
        const what = `${routeName(route)} -> ${status} (${fillPath(route.path, ids ?? 'x')})`;
        const op = doc.paths[toOpenApiPath(route.path)]?.[route.method.toLowerCase()];
        expect(op?.responses[status], `${what} is not documented`).toBeDefined();
        const content = op?.responses[status]?.content;
        if (!content) {
          expect(res.body, what).toBe('');
          continue;
        }
        const pointer = `openapi.json#/paths/${ptr(toOpenApiPath(route.path))}/${route.method.toLowerCase()}/responses/${status}/content/${ptr('application/json')}/schema`;
        const validate = ajv.compile({ $ref: pointer });
        const ok = validate(res.json());
        expect(ok, `${what}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    }
    // Every catalog route twice, each answer checked against the whole document (examples
    // included): 9-11 s alone, past vitest's 30 s default when the suite runs beside it.
  }, 120_000);
});
