/**
 * Shared pieces of the bad-input tests: fast-check run parameters (a fixed seed through
 * FUZZ_SEED, more or fewer runs through FUZZ_RUNS_FACTOR), the contract check every answer must
 * pass, and the /v1 routes as fuzz targets (route catalog + the schemas of /v1/openapi.json).
 *
 * Reproducing a failure: fast-check prints `seed` and `path`; run
 *   FUZZ_SEED=<seed> FUZZ_PATH=<path> npx vitest run test/fuzz/<file>
 * FUZZ_LOG_LEVEL=error shows the server's own log line of a 5xx.
 */
import type fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { fillPath, ROUTES } from '../helpers/route-catalog.ts';
import type { Schema } from './schema-arb.ts';

/**
 * Time allowed to one property test: its run count is fixed, so this only guards against a
 * wedged server; on a loaded machine the same runs take several times longer than on an idle one.
 */
export const FUZZ_TIMEOUT_MS = 240_000;

/** fast-check parameters: `numRuns` scaled by FUZZ_RUNS_FACTOR; FUZZ_SEED / FUZZ_PATH replay a failure. */
export function fuzzParams<T>(numRuns: number): fc.Parameters<T> {
  const factor = Number(process.env.FUZZ_RUNS_FACTOR ?? '1') || 1;
  const params: fc.Parameters<T> = { numRuns: Math.max(1, Math.round(numRuns * factor)) };
  if (process.env.FUZZ_SEED) params.seed = Number(process.env.FUZZ_SEED);
  if (process.env.FUZZ_PATH) params.path = process.env.FUZZ_PATH;
  return params;
}

/** Error codes and their statuses, as docs/api.md "Errors" defines them. */
export const ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_json: 400,
  invalid_cursor: 400,
  invalid_idempotency_key: 400,
  invalid_parameter: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_reused: 409,
  idempotency_in_progress: 409,
  domain_limit_reached: 409,
  name_taken: 409,
  in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  validation_failed: 422,
  sender_domain_not_verified: 422,
  rate_limited: 429,
};

/** Codes only the dashboard's JSON API answers (docs/dashboard.md). */
export const DASHBOARD_STATUS: Readonly<Record<string, number>> = {
  invalid_credentials: 401,
  invalid_link: 401,
  csrf_failed: 403,
};

export interface Sent {
  method: string;
  url: string;
  headers?: Record<string, string>;
  payload?: string | Buffer;
}

function describeExchange(sent: Sent, res: LightMyRequestResponse): string {
  const payload = sent.payload === undefined ? '' : String(sent.payload).slice(0, 400);
  return `${sent.method} ${sent.url.slice(0, 300)}\nheaders: ${JSON.stringify(sent.headers ?? {}).slice(0, 400)}\nbody: ${JSON.stringify(payload)}\n-> ${res.statusCode} ${res.body.slice(0, 400)}`;
}

/**
 * Throws unless `res` is what the contract allows for bad input: never 5xx, and every non-2xx
 * answer is JSON `{"errors":[{"code","message","field"?}]}` with the status of its code.
 */
export function checkAnswer(sent: Sent, res: LightMyRequestResponse, opts: { dashboard?: boolean } = {}): void {
  const extra = opts.dashboard ? DASHBOARD_STATUS : {};
  const fail = (why: string): never => {
    throw new Error(`${why}\n${describeExchange(sent, res)}`);
  };
  if (res.statusCode >= 500) fail('server error on bad input');
  if (!res.headers['x-request-id']) fail('no X-Request-ID');
  if (res.statusCode < 400) return;
  if (!String(res.headers['content-type'] ?? '').startsWith('application/json')) fail('error answer is not JSON');
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    fail('error body does not parse');
  }
  const errors = (body as { errors?: unknown }).errors;
  if (!Array.isArray(errors) || errors.length === 0) fail('error body has no errors[]');
  if (Object.keys(body as object).length !== 1) fail('error body has more than errors[]');
  for (const e of errors as Record<string, unknown>[]) {
    if (typeof e.code !== 'string' || !/^[a-z][a-z0-9_]*$/.test(e.code))
      fail(`bad error code ${JSON.stringify(e.code)}`);
    if (typeof e.message !== 'string' || e.message.length === 0) fail('error without a message');
    if (/\n\s+at /.test(String(e.message))) fail('stack trace in an error message');
    if (e.field !== undefined && typeof e.field !== 'string') fail('field is not a string');
    const code = e.code as string;
    const expected = ERROR_STATUS[code] ?? extra[code];
    if (expected !== undefined && expected !== res.statusCode) fail(`code ${code} with status ${res.statusCode}`);
    if (expected === undefined && code !== 'invalid_request') fail(`undocumented error code ${code}`);
  }
  if (res.statusCode === 401 && !opts.dashboard && res.headers['www-authenticate'] !== 'Bearer') {
    fail('401 without WWW-Authenticate: Bearer');
  }
}

/** app.inject, then checkAnswer; returns the answer for further checks. */
export async function send(
  ctx: TestContext,
  sent: Sent & { remoteAddress?: string },
  opts: { dashboard?: boolean } = {},
): Promise<LightMyRequestResponse> {
  const inject: InjectOptions = {
    method: sent.method as InjectOptions['method'],
    url: sent.url,
    headers: sent.headers ?? {},
    ...(sent.payload !== undefined ? { payload: sent.payload } : {}),
    ...(sent.remoteAddress ? { remoteAddress: sent.remoteAddress } : {}),
  };
  const res = await ctx.app.inject(inject);
  checkAnswer(sent, res, opts);
  return res;
}

// ---- the /v1 routes as targets -----------------------------------------------------------------

export interface Target {
  method: string;
  /** Fastify pattern from the route catalog. */
  path: string;
  /** The path with a real id of the fuzzing tenant filled in. */
  url: string;
  body: Schema | null;
  query: string[];
  /** Takes an Idempotency-Key header. */
  idempotent: boolean;
}

interface OpenApiOperation {
  parameters?: { in: string; name: string }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
}

export interface ApiFuzz {
  ctx: TestContext;
  tenant: TestTenant;
  dns: DnsServer;
  targets: Target[];
  close(): Promise<void>;
}

/** The catalog route `method path` of a fuzz setup (throws if the catalog lacks it). */
export function targetOf(f: ApiFuzz, method: string, path: string): Target {
  const t = f.targets.find((x) => x.method === method && x.path === path);
  if (!t) throw new Error(`no target ${method} ${path}`);
  return t;
}

/**
 * A test context (DNS pointed at an empty local server, so domain verification fails fast), one
 * tenant holding every scope, and every catalog route with a real id and its OpenAPI schemas.
 */
export async function setupApiFuzz(env: Record<string, string> = {}): Promise<ApiFuzz> {
  const dns = await startDnsServer();
  const ctx = await createTestContext({
    env: { POSTYARD_DNS_SERVERS: dns.address, POSTYARD_LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? 'silent', ...env },
  });
  const tenant = await createTenant(ctx);
  const doc = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as {
    paths: Record<string, Record<string, OpenApiOperation>>;
  };
  const targets: Target[] = [];
  for (const r of ROUTES) {
    const op = doc.paths[r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')]?.[r.method.toLowerCase()];
    if (!op) throw new Error(`${r.method} ${r.path} is in the route catalog but not in the OpenAPI document`);
    const url = r.makeId ? fillPath(r.path, await r.makeId(ctx, tenant)) : r.path;
    targets.push({
      method: r.method,
      path: r.path,
      url,
      body: op.requestBody?.content?.['application/json']?.schema ?? null,
      query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      idempotent: (op.parameters ?? []).some((p) => p.in === 'header' && p.name === 'idempotency-key'),
    });
  }
  return {
    ctx,
    tenant,
    dns,
    targets,
    async close() {
      await ctx.close();
      await dns.close();
    },
  };
}

/** The app still answers a plain request normally (nothing wedged or crashed by the fuzzing). */
export async function expectHealthy(f: ApiFuzz): Promise<void> {
  const health = await f.ctx.app.inject({ method: 'GET', url: '/healthz' });
  if (health.statusCode !== 200) throw new Error(`healthz answered ${health.statusCode}`);
  const res = await f.ctx.app.inject({
    method: 'POST',
    url: '/v1/transmissions',
    headers: { authorization: `Bearer ${f.tenant.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({
      recipients: [{ email: 'after-fuzz@example.com' }],
      content: { subject: 's', text: 't' },
    }),
  });
  if (res.statusCode !== 202)
    throw new Error(`a valid transmission answered ${res.statusCode} after fuzzing: ${res.body}`);
}
