/**
 * Tenant isolation beyond the /v1 id routes (those are proven for every catalog route by the
 * shared suite, test/foundation/security.test.ts): every dashboard JSON route with an id answers
 * another tenant's id with 404 (and the owner gets past 404); every list, on /v1 and in the
 * dashboard, shows only the caller's rows; Idempotency-Keys and suppressions never cross tenants.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DashClient, PASSWORD } from '../dashboard/helpers.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { apiKeyId } from '../api-keys/routes.ts';
import { sendingDomainId } from '../domains/routes.ts';
import type { MakeId } from '../helpers/route-spec.ts';
import { smtpCredentialId } from '../smtp-credentials/routes.ts';
import { transmissionId } from '../transmissions/routes.ts';
import { webhookId } from '../webhooks/routes.ts';
import { suppressionId } from '../suppressions/routes.ts';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
const P = '/dashboard/api';

type IdCheck = { method: Method; path: string; makeId: MakeId; body?: unknown };

/** Each module declares its dashboard routes with an id beside its catalog entries. */
const moduleChecks = import.meta.glob<{ DASHBOARD_ID_CHECKS?: IdCheck[] }>('../*/routes.ts', { eager: true });

/** Every dashboard route with a path parameter (the coverage test below keeps this complete). */
const DASHBOARD_ID_ROUTES: IdCheck[] = Object.values(moduleChecks).flatMap((m) => m.DASHBOARD_ID_CHECKS ?? []);

/** `METHOD /path` of every route Fastify serves, read from printRoutes (one node per line). */
function servedRoutes(tree: string): string[] {
  const out: string[] = [];
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:[│ ] {3})*)(?:[├└]── )(.*?)(?: \(([^)]*)\))?$/.exec(line);
    if (!m) continue;
    stack.length = (m[1] ?? '').length / 4;
    stack.push(m[2] ?? '');
    for (const method of (m[3] ?? '').split(',').map((s) => s.trim())) {
      if (method) out.push(`${method} ${stack.join('').replace(/^\/\//, '/')}`);
    }
  }
  return out;
}

interface Side {
  tenant: TestTenant;
  dash: DashClient;
}

let ctx: TestContext;
let a: Side;
let b: Side;

async function side(n: number): Promise<Side> {
  const tenant = await createTenant(ctx, `T${n} <t${n}@example.com>`);
  const email = `iso${n}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  await ctx.c.dashboard.createUser(tenant.tenantId, { email, password: PASSWORD });
  const dash = new DashClient(ctx.app);
  expect((await dash.login(email, PASSWORD)).statusCode).toBe(200);
  return { tenant, dash };
}

beforeAll(async () => {
  ctx = await createTestContext();
  a = await side(1);
  b = await side(2);
});
afterAll(async () => {
  await ctx?.close();
});

function send(s: Side, method: Method, url: string, body?: unknown): Promise<LightMyRequestResponse> {
  return s.dash.request(method, url, body === undefined ? {} : { body });
}

describe('dashboard routes with an id', () => {
  it('the list above covers every dashboard route with a path parameter', () => {
    const served = servedRoutes(ctx.app.printRoutes({ commonPrefix: false }))
      .filter((r) => r.includes(`${P}/`) && r.includes(':') && !/^(HEAD|OPTIONS) /.test(r))
      .sort();
    expect(served.length).toBeGreaterThan(5);
    expect(served).toEqual(DASHBOARD_ID_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
  });

  it.each(DASHBOARD_ID_ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))(
    "%s: another tenant's id is 404 not_found; the owner gets past 404",
    async (_name, route) => {
      const id = await route.makeId(ctx, a.tenant);
      const url = route.path.replace(':id', encodeURIComponent(typeof id === 'string' ? id : (id.id ?? '')));
      const foreign = await send(b, route.method, url, route.body);
      expect(foreign.statusCode, foreign.body).toBe(404);
      expect((foreign.json() as { errors: { code: string }[] }).errors[0]?.code).toBe('not_found');
      const own = await send(a, route.method, url, route.body);
      expect(own.statusCode, own.body).toBeLessThan(400);
    },
  );
});

describe('lists show only the caller tenant', () => {
  it('on /v1 and in the dashboard, nothing of tenant A shows up for tenant B', async () => {
    const made = {
      apiKey: await apiKeyId(ctx, a.tenant),
      smtp: await smtpCredentialId(ctx, a.tenant),
      domain: await sendingDomainId(ctx, a.tenant),
      webhook: await webhookId(ctx, a.tenant),
      suppression: await suppressionId(ctx, a.tenant),
      transmission: await transmissionId(ctx, a.tenant),
    };
    const v1 = [
      '/v1/api-keys',
      '/v1/smtp-credentials',
      '/v1/sending-domains',
      '/v1/webhooks',
      '/v1/suppressions',
      '/v1/events',
      `/v1/events?transmission_id=${made.transmission}`,
    ];
    const dash = [
      `${P}/api-keys`,
      `${P}/smtp-credentials`,
      `${P}/domains`,
      `${P}/webhooks`,
      `${P}/suppressions`,
      `${P}/events`,
      `${P}/events?transmission_id=${made.transmission}`,
    ];
    // Self-check: A sees its own rows in the same lists.
    const ownText = (await Promise.all(v1.map((u) => call(ctx.app, 'GET', u, { key: a.tenant.apiKey })))).map(
      (r) => r.body,
    );
    for (const id of Object.values(made)) expect(ownText.join('\n')).toContain(id);

    for (const url of v1) {
      const res = await call(ctx.app, 'GET', url, { key: b.tenant.apiKey });
      expect(res.statusCode, url).toBe(200);
      for (const [what, id] of Object.entries(made)) expect(res.body, `${what} in ${url}`).not.toContain(id);
      expect(res.body).not.toContain(a.tenant.tenantId);
    }
    for (const url of dash) {
      const res = await b.dash.get(url);
      expect(res.statusCode, url).toBe(200);
      for (const [what, id] of Object.entries(made)) expect(res.body, `${what} in ${url}`).not.toContain(id);
      expect(res.body).not.toContain(a.tenant.tenantId);
    }
    const stats = (await b.dash.get(`${P}/stats?range=24h`)).body;
    expect(stats).not.toContain(a.tenant.tenantId);
  });
});

describe('other shared namespaces', () => {
  it("the same Idempotency-Key in two tenants never replays the other tenant's answer", async () => {
    const body = { url: 'http://127.0.0.1:9/same', events: ['*'] };
    const headers = { 'idempotency-key': 'shared-key-1' };
    const first = await call(ctx.app, 'POST', '/v1/webhooks', { key: a.tenant.apiKey, body, headers });
    const second = await call(ctx.app, 'POST', '/v1/webhooks', { key: b.tenant.apiKey, body, headers });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    const [x, y] = [first.json() as { id: string; secret: string }, second.json() as { id: string; secret: string }];
    expect(y.id).not.toBe(x.id);
    expect(y.secret).toMatch(/^whsec_/);
    expect(y.secret).not.toBe(x.secret);
  });

  it("a suppression of tenant A never suppresses tenant B's mail", async () => {
    const email = `shared-${Math.random().toString(36).slice(2, 8)}@example.com`;
    const sup = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: a.tenant.apiKey,
      body: { items: [{ identifier: email, type: 'email', reason_category: 'manual' }] },
    });
    expect(sup.statusCode).toBe(200);
    const tx = { recipients: [{ email }], content: { subject: 's', text: 't' } };
    const fromA = await call(ctx.app, 'POST', '/v1/transmissions', { key: a.tenant.apiKey, body: tx });
    const fromB = await call(ctx.app, 'POST', '/v1/transmissions', { key: b.tenant.apiKey, body: tx });
    expect((fromA.json() as { total_accepted_recipients: number }).total_accepted_recipients).toBe(0);
    expect((fromB.json() as { total_accepted_recipients: number }).total_accepted_recipients).toBe(1);
  });
});
