/**
 * Property: the dashboard's JSON API (/dashboard/api/*, session-authenticated, CSRF-checked)
 * answers any body, query, id and odd session/CSRF headers without a 5xx, with the error shape
 * of /v1 (plus its own codes invalid_credentials, invalid_link, csrf_failed).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../src/modules/api-keys/scopes.ts';
import { CreateWebhookBody, UpdateWebhookBody } from '../../src/modules/webhooks/webhooks.schema.ts';
import { type DashUser, signedInUser } from '../dashboard/helpers.ts';
import type { TestContext, TestTenant } from '../helpers/context.ts';
import { apiKeyId } from '../api-keys/routes.ts';
import { sendingDomainId } from '../domains/routes.ts';
import type { MakeId } from '../helpers/route-spec.ts';
import { smtpCredentialId } from '../smtp-credentials/routes.ts';
import { messageId, transmissionId } from '../transmissions/routes.ts';
import { webhookId } from '../webhooks/routes.ts';
import { suppressionId } from '../suppressions/routes.ts';
import { headerValue, nastyString, pct, queryString, toJson } from './arbitraries.ts';
import { nearValid, rawJsonText, type Schema } from './schema-arb.ts';
import { type ApiFuzz, FUZZ_TIMEOUT_MS, fuzzParams, send, setupApiFuzz } from './harness.ts';

const str = (minLength: number, maxLength: number): Schema => ({ type: 'string', minLength, maxLength });
const obj = (properties: Record<string, Schema>, required: string[]): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

interface DashRoute {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  body?: Schema;
  query?: string[];
  makeId?: MakeId;
}

const P = '/dashboard/api';
const PAGE = ['limit', 'cursor'];
const DASH_ROUTES: DashRoute[] = [
  { method: 'GET', path: `${P}/session` },
  { method: 'GET', path: `${P}/stats`, query: ['range'] },
  {
    method: 'GET',
    path: `${P}/events`,
    query: [...PAGE, 'type', 'recipient', 'transmission_id', 'message_id', 'tag', 'from', 'to'],
  },
  { method: 'GET', path: `${P}/messages/:id`, makeId: messageId },
  { method: 'GET', path: `${P}/transmissions/:id`, makeId: transmissionId },
  { method: 'GET', path: `${P}/scopes` },
  { method: 'GET', path: `${P}/api-keys`, query: PAGE },
  {
    method: 'POST',
    path: `${P}/api-keys`,
    body: obj({ name: str(1, 200), scopes: { type: 'array', minItems: 1, items: { enum: [...SCOPES] } } }, [
      'name',
      'scopes',
    ]),
  },
  { method: 'DELETE', path: `${P}/api-keys/:id`, makeId: apiKeyId },
  { method: 'GET', path: `${P}/smtp-credentials`, query: PAGE },
  { method: 'POST', path: `${P}/smtp-credentials`, body: obj({ name: str(1, 200) }, ['name']) },
  { method: 'DELETE', path: `${P}/smtp-credentials/:id`, makeId: smtpCredentialId },
  { method: 'GET', path: `${P}/webhooks`, query: PAGE },
  { method: 'POST', path: `${P}/webhooks`, body: CreateWebhookBody as Schema },
  { method: 'PATCH', path: `${P}/webhooks/:id`, body: UpdateWebhookBody as Schema, makeId: webhookId },
  { method: 'DELETE', path: `${P}/webhooks/:id`, makeId: webhookId },
  { method: 'POST', path: `${P}/webhooks/:id/rotate-secret`, makeId: webhookId },
  { method: 'POST', path: `${P}/webhooks/:id/test`, makeId: webhookId },
  { method: 'GET', path: `${P}/webhooks/:id/deliveries`, query: PAGE, makeId: webhookId },
  { method: 'GET', path: `${P}/suppressions`, query: [...PAGE, 'type', 'reason_category', 'identifier'] },
  {
    method: 'POST',
    path: `${P}/suppressions`,
    body: obj(
      {
        identifier: str(1, 320),
        type: { enum: ['email', 'domain'] },
        reason_category: { enum: ['manual', 'unsubscribe', 'hard_bounce', 'complaint', 'invalid'] },
        description: str(0, 1024),
      },
      ['identifier', 'type', 'reason_category'],
    ),
  },
  { method: 'DELETE', path: `${P}/suppressions/:id`, makeId: suppressionId },
  { method: 'GET', path: `${P}/domains`, query: PAGE },
  { method: 'POST', path: `${P}/domains`, body: obj({ domain: str(1, 253) }, ['domain']) },
  { method: 'POST', path: `${P}/domains/:id/verify`, makeId: sendingDomainId },
  { method: 'DELETE', path: `${P}/domains/:id`, makeId: sendingDomainId },
  {
    method: 'POST',
    path: `${P}/login`,
    body: obj({ email: str(0, 320), password: str(0, 1024) }, ['email', 'password']),
  },
  { method: 'POST', path: `${P}/login/link`, body: obj({ token: str(0, 200) }, ['token']) },
  {
    method: 'POST',
    path: `${P}/password`,
    body: obj({ password: str(0, 1024), current_password: str(0, 1024) }, ['password']),
  },
  { method: 'POST', path: `${P}/logout` },
];

let f: ApiFuzz;
let shared: DashUser;
/** 2xx answers to schema-derived bodies, over every route: the session and CSRF plumbing works. */
let bodiesAccepted = 0;
beforeAll(async () => {
  // The DNS and context of the /v1 fuzzing (domain verification fails fast on the empty DNS).
  f = await setupApiFuzz();
  shared = await signedInUser(f.ctx);
});
afterAll(async () => {
  await f?.close();
});

type Csrf = 'valid' | 'none' | 'junk';
const csrf = fc.oneof(
  { arbitrary: fc.constant<Csrf>('valid'), weight: 6 },
  { arbitrary: fc.constantFrom<Csrf>('none', 'junk'), weight: 1 },
);
const oddHeaders = fc.record(
  {
    origin: fc.oneof(fc.constantFrom('http://localhost:80', 'https://evil.example', 'null', ''), headerValue),
    'sec-fetch-site': fc.constantFrom('same-origin', 'cross-site', 'none', ''),
    cookie: fc.oneof(
      fc.constantFrom('postyard_session=', 'postyard_session=x; postyard_session=y', ';;=;'),
      headerValue,
    ),
    'content-type': fc.constantFrom(
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=z',
    ),
  },
  { requiredKeys: [] },
);

function payloads(body: Schema | undefined): fc.Arbitrary<string | undefined> {
  const any = fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' });
  if (!body) return fc.oneof(fc.constant(undefined), any.map(toJson));
  const near = nearValid(body);
  return fc.oneof(
    { arbitrary: near.map(toJson), weight: 6 },
    { arbitrary: near.chain(rawJsonText), weight: 2 },
    { arbitrary: any.map(toJson), weight: 1 },
  );
}

const pathId = fc.oneof(
  { arbitrary: fc.constant<string | null>(null), weight: 3 },
  { arbitrary: fc.uuid(), weight: 1 },
  { arbitrary: nastyString.map(pct), weight: 2 },
);

async function realId(ctx: TestContext, tenant: TestTenant, make: MakeId): Promise<string> {
  const ids = await make(ctx, tenant);
  return typeof ids === 'string' ? ids : (Object.values(ids)[0] ?? '');
}

describe('dashboard JSON API: bodies, queries, ids, session and CSRF headers', () => {
  for (const r of DASH_ROUTES) {
    const slow = r.method === 'POST' && /smtp-credentials|domains$|login|password/.test(r.path);
    it(
      `${r.method} ${r.path}: never a 5xx, always the documented error`,
      async () => {
        // Logout and password changes end sessions: those get a user of their own.
        const user = /logout|password/.test(r.path) ? await signedInUser(f.ctx) : shared;
        const id = r.makeId ? await realId(f.ctx, user.tenant, r.makeId) : null;
        await fc.assert(
          fc.asyncProperty(
            payloads(r.body),
            queryString(r.query ?? []),
            pathId,
            csrf,
            fc.oneof({ arbitrary: fc.constant(undefined), weight: 5 }, { arbitrary: oddHeaders, weight: 1 }),
            async (payload, query, otherId, token, odd) => {
              const path = r.path.replace(':id', otherId ?? id ?? '');
              const url = `${path}${r.query && query ? `?${query}` : ''}`;
              const headers: Record<string, string> = { cookie: user.client.cookieHeader() };
              if (payload !== undefined) headers['content-type'] = 'application/json';
              if (r.method !== 'GET' && token !== 'none')
                headers['x-csrf-token'] = token === 'valid' ? user.client.csrf : 'x'.repeat(43);
              Object.assign(headers, odd ?? {});
              const res = await send(
                f.ctx,
                {
                  method: r.method,
                  url,
                  headers,
                  ...(payload !== undefined ? { payload } : {}),
                  remoteAddress: user.client.ip,
                },
                { dashboard: true },
              );
              if (res.statusCode < 300 && r.body) bodiesAccepted++;
            },
          ),
          fuzzParams(r.method === 'GET' ? 20 : slow ? 25 : 50),
        );
      },
      FUZZ_TIMEOUT_MS,
    );
  }

  it(
    'pages and unknown dashboard paths: never a 5xx',
    async () => {
      const user = shared;
      const path = fc.oneof(
        fc.constantFrom('/', '/login', '/activity', '/settings/api-keys', '/domains', '/messages/x', '/dashboard/api/'),
        fc.array(nastyString.map(pct), { minLength: 1, maxLength: 3 }).map((s) => `/${s.join('/')}`),
        nastyString.map((s) => `/dashboard/api/${pct(s)}`),
      );
      await fc.assert(
        fc.asyncProperty(path, queryString(['next']), fc.boolean(), async (p, q, signedIn) => {
          const res = await f.ctx.app.inject({
            method: 'GET',
            url: `${p}${q ? `?${q}` : ''}`,
            headers: signedIn ? { cookie: user.client.cookieHeader() } : {},
          });
          expect(res.statusCode, `GET ${p}?${q}: ${res.body.slice(0, 200)}`).toBeLessThan(500);
        }),
        fuzzParams(60),
      );
    },
    FUZZ_TIMEOUT_MS,
  );

  it('schema-derived bodies do get through the session and CSRF checks', () => {
    expect(bodiesAccepted).toBeGreaterThan(0);
  });
});
