/**
 * Property: whatever body a client sends to any /v1 route (arbitrary JSON, bodies derived from
 * the route's OpenAPI schema and then broken, JSON texts JSON.stringify never writes, bytes that
 * are not UTF-8), the answer is never a 5xx and every error has the contract's shape and status.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES, routeName } from '../helpers/route-catalog.ts';
import { toJson } from './arbitraries.ts';
import { nearValid, rawBytes, rawJsonText } from './schema-arb.ts';
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

/** Every kind of body, weighted toward the ones that get past the JSON parser. */
function payloads(t: Target): fc.Arbitrary<string | Buffer> {
  const any = fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' });
  if (!t.body) {
    return fc.oneof(any.map(toJson), any.chain(rawJsonText), rawBytes);
  }
  const near = nearValid(t.body);
  return fc.oneof(
    { arbitrary: near.map(toJson), weight: 6 },
    { arbitrary: near.chain(rawJsonText), weight: 2 },
    { arbitrary: any.map(toJson), weight: 1 },
    { arbitrary: rawBytes, weight: 1 },
  );
}

/** 2xx answers to schema-derived bodies, over every route. */
let bodiesAccepted = 0;

/** Routes whose successful calls are slow (a password hash, a DKIM key) get fewer runs. */
const RUNS: Record<string, number> = { '/v1/smtp-credentials': 30, '/v1/sending-domains': 40 };

describe('every /v1 route: arbitrary and nearly valid bodies', () => {
  for (const r of ROUTES) {
    // Body-less routes get a few runs (the body is ignored or refused); routes with a schema more.
    const runs = r.method === 'GET' ? 10 : r.sampleBody !== undefined ? (RUNS[r.path] ?? 80) : 25;
    it(
      `${routeName(r)}: never a 5xx, always the documented error`,
      async () => {
        const t = target(r.method, r.path);
        const headers = { authorization: `Bearer ${f.tenant.apiKey}`, 'content-type': 'application/json' };
        await fc.assert(
          fc.asyncProperty(payloads(t), async (payload) => {
            const res = await send(f.ctx, { method: t.method, url: t.url, headers, payload });
            if (res.statusCode < 300 && t.body) bodiesAccepted++;
          }),
          fuzzParams(runs),
        );
      },
      FUZZ_TIMEOUT_MS,
    );
  }

  it('the app still serves normal requests afterwards', async () => {
    await expectHealthy(f);
    // The generators are not only noise: across all routes, schema-derived bodies often pass.
    expect(bodiesAccepted).toBeGreaterThan(0);
  });
});
