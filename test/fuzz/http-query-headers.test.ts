/**
 * Property: whatever query string, path id and headers (Authorization, Content-Type,
 * Idempotency-Key, X-Request-ID and other odd ones) a client sends to any /v1 route, with a
 * valid body or none, the answer is never a 5xx and every error has the contract's shape and
 * status. Plus arbitrary methods and paths.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasParams, ROUTES, routeName } from '../helpers/route-catalog.ts';
import { headerValue, nastyString, pct, queryString } from './arbitraries.ts';
import {
  type ApiFuzz,
  expectHealthy,
  FUZZ_TIMEOUT_MS,
  fuzzParams,
  send,
  setupApiFuzz,
  type Target,
  targetOf,
} from './harness.ts';

let f: ApiFuzz;
beforeAll(async () => {
  f = await setupApiFuzz();
});
afterAll(async () => {
  await f?.close();
});

const target = (method: string, path: string): Target => targetOf(f, method, path);

const base62 = fc.stringMatching(/^[0-9A-Za-z]{44}$/);

/** Authorization header values: mostly the right key (so the rest is exercised), else garbage. */
function authorization(key: string): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { arbitrary: fc.constant(`Bearer ${key}`), weight: 8 },
    {
      arbitrary: fc.oneof(
        fc.constant(undefined),
        fc.constantFrom(
          'Bearer',
          'Bearer ',
          `bearer ${key}`,
          `Bearer  ${key}`,
          `Bearer ${key} `,
          `Bearer ${key}x`,
          `Bearer ${key.slice(0, -1)}`,
          `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
          `Bearer ${key}, Bearer ${key}`,
          `Bearer pyk_${'A'.repeat(5000)}`,
          'Bearer pyk_',
          `Token ${key}`,
        ),
        base62.map((s) => `Bearer pyk_${s}`),
        headerValue.map((v) => `Bearer ${v}`),
        headerValue,
      ),
      weight: 4,
    },
  );
}

const contentType = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 6 },
  {
    arbitrary: fc.constantFrom(
      undefined,
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json;charset=latin1',
      'application/json; charset="utf-8"',
      'application/json, text/plain',
      'application/jsonx',
      'application/vnd.api+json',
      'application/x-www-form-urlencoded',
      'multipart/form-data',
      'multipart/form-data; boundary=x',
      'text/plain',
      'text/csv',
      ';',
      '',
    ),
    weight: 4,
  },
  { arbitrary: headerValue, weight: 1 },
);

const idempotencyKey = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 4 },
  { arbitrary: fc.stringMatching(/^[!-~]{1,40}$/), weight: 3 },
  {
    arbitrary: fc.constantFrom('', ' ', 'a b', 'x'.repeat(255), 'x'.repeat(256), '\u00e9t\u00e9', '\t', 'k\u00ff'),
    weight: 2,
  },
  { arbitrary: headerValue, weight: 1 },
);

const requestId = fc.oneof(
  fc.constant(undefined),
  fc.stringMatching(/^[A-Za-z0-9._-]{1,128}$/),
  fc.constantFrom('', 'x'.repeat(129), 'a b', '../x', '<script>'),
  headerValue,
);

/** Any other header a client or proxy might add. */
const oddHeader = fc.tuple(
  fc.constantFrom(
    'accept',
    'accept-encoding',
    'accept-language',
    'content-encoding',
    'cookie',
    'origin',
    'referer',
    'x-forwarded-for',
    'x-forwarded-proto',
    'x-real-ip',
    'if-none-match',
    'range',
    'user-agent',
    'x-csrf-token',
    'prefer',
  ),
  fc.oneof(
    headerValue,
    fc.constantFrom('gzip', 'br', 'deflate', 'identity', '*/*', 'text/html', 'bytes=0-10', '1.2.3.4, ::1'),
  ),
);

/** A path id: the real one, a random UUID, or junk (percent-encoded as a client would). */
const pathId = fc.oneof(
  { arbitrary: fc.constant<string | null>(null), weight: 3 },
  { arbitrary: fc.uuid(), weight: 2 },
  { arbitrary: fc.oneof(nastyString, fc.string({ unit: 'binary', maxLength: 80 })).map(pct), weight: 3 },
  { arbitrary: fc.constantFrom('..', '%2e%2e', '%2F', '%', '%zz', '%ff', 'x'.repeat(65), 'x'.repeat(2000)), weight: 1 },
);

function urlFor(t: Target, id: string | null): string {
  if (id === null || !hasParams(t.path)) return t.url;
  return t.path.replace(/:([A-Za-z0-9_]+)/, id);
}

/** Creates whose success is slow (a password hash, a DKIM key) get fewer runs. */
const SLOW = ['/v1/smtp-credentials', '/v1/sending-domains'];

describe('every /v1 route: query strings, path ids and headers', () => {
  for (const r of ROUTES) {
    it(
      `${routeName(r)}: never a 5xx, always the documented error`,
      async () => {
        const t = target(r.method, r.path);
        const payload = r.sampleBody === undefined || r.contentType ? undefined : JSON.stringify(r.sampleBody);
        await fc.assert(
          fc.asyncProperty(
            queryString(t.query),
            pathId,
            authorization(f.tenant.apiKey),
            contentType,
            idempotencyKey,
            requestId,
            fc.array(oddHeader, { maxLength: 2 }),
            async (query, id, auth, type, idem, reqId, odd) => {
              const headers: Record<string, string> = Object.fromEntries(odd);
              if (auth !== undefined) headers.authorization = auth;
              if (type !== undefined && payload !== undefined) headers['content-type'] = type;
              if (idem !== undefined) headers['idempotency-key'] = idem;
              if (reqId !== undefined) headers['x-request-id'] = reqId;
              const url = `${urlFor(t, id)}${query ? `?${query}` : ''}`;
              const res = await send(f.ctx, { method: t.method, url, headers, ...(payload ? { payload } : {}) });
              if (reqId && /^[A-Za-z0-9._-]{1,128}$/.test(reqId)) expect(res.headers['x-request-id']).toBe(reqId);
            },
          ),
          fuzzParams(r.method === 'POST' && SLOW.includes(r.path) ? 25 : 50),
        );
      },
      FUZZ_TIMEOUT_MS,
    );
  }
});

describe('any method on any path', () => {
  const method = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE', 'SEARCH');
  const path = fc.oneof(
    fc.constantFrom(...ROUTES.map((r) => r.path.replace(/:id/, '00000000-0000-7000-8000-000000000000'))),
    fc.constantFrom(
      '/',
      '/v1',
      '/v1/',
      '//v1//api-keys',
      '/v1/api-keys/',
      '/v1/../healthz',
      '/v1/%2e%2e/healthz',
      '/metrics',
    ),
    fc
      .array(fc.oneof(nastyString.map(pct), fc.constantFrom('v1', 'webhooks', 'x')), { maxLength: 4 })
      .map((s) => `/${s.join('/')}`),
  );

  it(
    'never a 5xx, always the documented error',
    async () => {
      await fc.assert(
        fc.asyncProperty(method, path, queryString([]), async (m, p, q) => {
          const headers = { authorization: `Bearer ${f.tenant.apiKey}` };
          const sent = { method: m, url: `${p}${q ? `?${q}` : ''}`, headers };
          if (m === 'HEAD' || p === '/metrics' || p.includes('healthz')) {
            // No body to check on HEAD; /metrics answers text.
            const res = await f.ctx.app.inject({ method: m as 'GET', url: sent.url, headers });
            expect(res.statusCode, `${m} ${sent.url}`).toBeLessThan(500);
            return;
          }
          await send(f.ctx, sent);
        }),
        fuzzParams(150),
      );
      await expectHealthy(f);
    },
    FUZZ_TIMEOUT_MS,
  );
});
