/**
 * Every /v1 route of the API, as data. The shared security suite (security-suite.ts) runs each
 * entry through: no token, bad token, deleted key, wrong scope, and (for routes with path
 * parameters) another tenant's id. A test compares this table with the OpenAPI document, so a
 * route added without an entry here fails CI.
 *
 * Adding a route is one line in ROUTES, e.g.
 *   { method: 'DELETE', path: '/v1/webhooks/:id', scopes: ['manage:webhooks'], makeId: webhookId },
 * where `webhookId` (ctx, tenant) => Promise<string> creates a webhook of `tenant` and returns its id.
 */
import { SUPPRESSION_ROUTES } from '../suppressions/routes.ts';
import type { TestContext, TestTenant } from './context.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Creates a resource owned by `tenant` and returns its id (or the values of every path parameter). */
export type MakeId = (ctx: TestContext, tenant: TestTenant) => Promise<string | Record<string, string>>;

export interface RouteSpec {
  method: HttpMethod;
  /** Fastify pattern, e.g. /v1/api-keys/:id */
  path: string;
  /** Any one of these scopes grants access (the seed's scope table). */
  scopes: string[];
  /** A body that passes validation for a key holding exactly `scopes[0]`. */
  sampleBody?: unknown;
  /** Content-Type of sampleBody when it is not JSON (e.g. multipart imports); sampleBody is then sent raw. */
  contentType?: string;
  /** Required for routes with path parameters: creates the resource the path points at. */
  makeId?: MakeId;
}

// ---- id factories (each creates a fresh resource of the tenant) --------------------------------

async function post(ctx: TestContext, tenant: TestTenant, url: string, body: unknown): Promise<string> {
  const res = await ctx.app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  if (res.statusCode >= 300) throw new Error(`makeId: POST ${url} answered ${res.statusCode}: ${res.body}`);
  const id = (res.json() as { id?: string }).id;
  if (!id) throw new Error(`makeId: POST ${url} returned no id: ${res.body}`);
  return id;
}

export const apiKeyId: MakeId = (ctx, t) => post(ctx, t, '/v1/api-keys', { name: 'target', scopes: ['read:events'] });
export const smtpCredentialId: MakeId = (ctx, t) => post(ctx, t, '/v1/smtp-credentials', { name: 'target' });
export const sendingDomainId: MakeId = (ctx, t) =>
  post(ctx, t, '/v1/sending-domains', { domain: `d${Math.random().toString(36).slice(2, 10)}.example.test` });

// Port 9 (discard) on loopback refuses at once, so the test route answers quickly in the suite.
export const webhookId: MakeId = (ctx, t) =>
  post(ctx, t, '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['message.delivered'] });

async function sendOne(ctx: TestContext, t: TestTenant): Promise<{ transmissionId: string; messageId: string }> {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/v1/transmissions',
    headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ recipients: [{ email: 'catalog@example.com' }], content: { subject: 's', text: 't' } }),
  });
  if (res.statusCode !== 202) throw new Error(`makeId: POST /v1/transmissions answered ${res.statusCode}: ${res.body}`);
  const transmissionId = (res.json() as { transmission_id: string }).transmission_id;
  const msg = await ctx.c.database.db
    .selectFrom('messages')
    .select('id')
    .where('transmission_id', '=', transmissionId)
    .executeTakeFirstOrThrow();
  return { transmissionId, messageId: msg.id };
}
export const transmissionId: MakeId = async (ctx, t) => (await sendOne(ctx, t)).transmissionId;
export const messageId: MakeId = async (ctx, t) => (await sendOne(ctx, t)).messageId;

// ---- the catalog --------------------------------------------------------------------------------

const KEYS = ['manage:api-keys'];
const SMTP = ['manage:smtp-credentials'];
const DOMAINS = ['manage:sending-domains'];

const TX_READ = ['send:transmissions', 'read:events'];

export const ROUTES: RouteSpec[] = [
  ...SUPPRESSION_ROUTES,
  {
    method: 'POST',
    path: '/v1/transmissions',
    scopes: ['send:transmissions'],
    sampleBody: { recipients: [{ email: 'a@example.com' }], content: { subject: 's', text: 't' } },
  },
  { method: 'GET', path: '/v1/transmissions/:id', scopes: TX_READ, makeId: transmissionId },
  { method: 'GET', path: '/v1/messages/:id', scopes: TX_READ, makeId: messageId },
  { method: 'POST', path: '/v1/api-keys', scopes: KEYS, sampleBody: { name: 'k', scopes: ['manage:api-keys'] } },
  { method: 'GET', path: '/v1/api-keys', scopes: KEYS },
  { method: 'DELETE', path: '/v1/api-keys/:id', scopes: KEYS, makeId: apiKeyId },
  { method: 'POST', path: '/v1/smtp-credentials', scopes: SMTP, sampleBody: { name: 'c' } },
  { method: 'GET', path: '/v1/smtp-credentials', scopes: SMTP },
  { method: 'DELETE', path: '/v1/smtp-credentials/:id', scopes: SMTP, makeId: smtpCredentialId },
  { method: 'POST', path: '/v1/sending-domains', scopes: DOMAINS, sampleBody: { domain: 'catalog.example.test' } },
  { method: 'GET', path: '/v1/sending-domains', scopes: DOMAINS },
  { method: 'GET', path: '/v1/sending-domains/:id', scopes: DOMAINS, makeId: sendingDomainId },
  { method: 'DELETE', path: '/v1/sending-domains/:id', scopes: DOMAINS, makeId: sendingDomainId },
  { method: 'POST', path: '/v1/sending-domains/:id/verify', scopes: DOMAINS, makeId: sendingDomainId },
  { method: 'GET', path: '/v1/events', scopes: ['read:events'] },
  {
    method: 'POST',
    path: '/v1/webhooks',
    scopes: ['manage:webhooks'],
    sampleBody: { url: 'http://127.0.0.1:9/hook', events: ['*'] },
  },
  { method: 'GET', path: '/v1/webhooks', scopes: ['manage:webhooks'] },
  { method: 'GET', path: '/v1/webhooks/:id', scopes: ['manage:webhooks'], makeId: webhookId },
  {
    method: 'PATCH',
    path: '/v1/webhooks/:id',
    scopes: ['manage:webhooks'],
    sampleBody: { name: 'renamed' },
    makeId: webhookId,
  },
  { method: 'DELETE', path: '/v1/webhooks/:id', scopes: ['manage:webhooks'], makeId: webhookId },
  { method: 'POST', path: '/v1/webhooks/:id/rotate-secret', scopes: ['manage:webhooks'], makeId: webhookId },
  { method: 'POST', path: '/v1/webhooks/:id/test', scopes: ['manage:webhooks'], makeId: webhookId },
  { method: 'GET', path: '/v1/webhooks/:id/deliveries', scopes: ['manage:webhooks'], makeId: webhookId },
];

/** Routes served under /v1 that are deliberately public (no token) and need no catalog entry. */
export const PUBLIC_V1_ROUTES: Pick<RouteSpec, 'method' | 'path'>[] = [{ method: 'GET', path: '/v1/openapi.json' }];

export function routeName(r: Pick<RouteSpec, 'method' | 'path'>): string {
  return `${r.method} ${r.path}`;
}

/** The concrete URL of `route`, its parameters filled from makeId's result. */
export function fillPath(path: string, ids: string | Record<string, string>): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, (_m, name: string) =>
    encodeURIComponent(typeof ids === 'string' ? ids : (ids[name] ?? `missing-${name}`)),
  );
}

export function hasParams(path: string): boolean {
  return /:[A-Za-z0-9_]+/.test(path);
}

/** OpenAPI `/v1/things/{id}` -> Fastify `/v1/things/:id`. */
export function openApiToFastify(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ':$1');
}
