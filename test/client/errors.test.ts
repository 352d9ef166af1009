/**
 * Error subclasses per class of failure, each from a real answer of the server (401, 403, 404,
 * 409, 422) or of the fault proxy in front of it (429, 503: the server's own limiter and failures
 * are covered elsewhere), and the POSTYARD_API_KEY / POSTYARD_BASE_URL fallbacks.
 */
import {
  Postyard,
  PostyardAuthenticationError,
  PostyardConflictError,
  PostyardError,
  PostyardNotFoundError,
  PostyardRateLimitError,
  PostyardScopeError,
  PostyardServerError,
  PostyardValidationError,
} from '@postyard/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { keyWithScopes } from '../helpers/context.ts';
import { errorBody } from './fault-proxy.ts';
import { type LiveServer, MAIL, startLiveServer } from './helpers.ts';

let live: LiveServer;
beforeAll(async () => {
  live = await startLiveServer();
});
afterAll(async () => {
  await live?.close();
});
afterEach(() => {
  vi.unstubAllEnvs();
  live.proxy.reset();
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => expect.fail('the call succeeded'),
    (e: unknown) => e as PostyardError,
  );
const ALL = [
  PostyardAuthenticationError,
  PostyardScopeError,
  PostyardValidationError,
  PostyardNotFoundError,
  PostyardConflictError,
  PostyardRateLimitError,
  PostyardServerError,
];
/** The error is an instance of `cls` (and of PostyardError), and of no other subclass. */
function expectOnly(err: PostyardError, cls: (typeof ALL)[number], status: number, code: string) {
  expect(err).toBeInstanceOf(PostyardError);
  expect(ALL.filter((c) => err instanceof c)).toEqual([cls]);
  expect(err.name).toBe(cls.name);
  expect(err.status).toBe(status);
  expect(err.code).toBe(code);
}

describe('error subclasses', () => {
  it('401 unknown key: PostyardAuthenticationError', async () => {
    const client = new Postyard({ apiKey: `pyk_${'A'.repeat(44)}`, baseUrl: live.baseUrl });
    expectOnly(await failure(client.suppressions.list()), PostyardAuthenticationError, 401, 'unauthorized');
  });

  it('403 insufficient_scope: PostyardScopeError', async () => {
    const key = await keyWithScopes(live.ctx, live.tenant.tenantId, ['manage:suppressions']);
    const client = new Postyard({ apiKey: key, baseUrl: live.baseUrl });
    expectOnly(await failure(client.webhooks.list()), PostyardScopeError, 403, 'insufficient_scope');
  });

  it('422 validation_failed: PostyardValidationError with field errors', async () => {
    const client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
    const err = await failure(client.transmissions.send({ ...MAIL, recipients: [{ email: 'not an address' }] }));
    expectOnly(err, PostyardValidationError, 422, 'validation_failed');
    expect(Object.keys(err.fieldErrors)).toContain('recipients[0].email');
  });

  it('404: PostyardNotFoundError', async () => {
    const client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
    const err = await failure(client.webhooks.get('0190a8f4-0000-7000-8000-000000000000'));
    expectOnly(err, PostyardNotFoundError, 404, 'not_found');
  });

  it('409 idempotency_key_reused: PostyardConflictError', async () => {
    const client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
    const idempotencyKey = `errors-test-${Date.now()}`;
    await client.transmissions.send(MAIL, { idempotencyKey });
    const other = { ...MAIL, content: { ...MAIL.content, subject: 'another body' } };
    const err = await failure(client.transmissions.send(other, { idempotencyKey }));
    expectOnly(err, PostyardConflictError, 409, 'idempotency_key_reused');
  });

  it('429 after the retries: PostyardRateLimitError with retryAfterMs', async () => {
    const limited = { kind: 'status', status: 429, headers: { 'retry-after': '0' } } as const;
    live.proxy.inject([{ ...limited, body: errorBody('rate_limited', 'slow down') }], '/v1/suppressions');
    const err = await failure(live.client({ maxRetries: 0 }).suppressions.list());
    expectOnly(err, PostyardRateLimitError, 429, 'rate_limited');
    expect(err.retryAfterMs).toBe(0);
  });

  it('5xx, also an HTML page of a proxy: PostyardServerError', async () => {
    live.proxy.inject([{ kind: 'status', status: 503, body: '<html>Service Unavailable</html>' }], '/v1/suppressions');
    const err = await failure(live.client({ maxRetries: 0 }).suppressions.list());
    expectOnly(err, PostyardServerError, 503, 'http_503');
  });
});

describe('POSTYARD_API_KEY / POSTYARD_BASE_URL', () => {
  it('new Postyard() reads both from the environment', async () => {
    vi.stubEnv('POSTYARD_API_KEY', live.tenant.apiKey);
    vi.stubEnv('POSTYARD_BASE_URL', live.baseUrl);
    const page = await new Postyard().suppressions.list();
    expect(page.data).toEqual(expect.any(Array));
  });

  it('options win over the environment', async () => {
    vi.stubEnv('POSTYARD_API_KEY', `pyk_${'B'.repeat(44)}`);
    vi.stubEnv('POSTYARD_BASE_URL', 'http://127.0.0.1:1');
    const client = new Postyard({ apiKey: live.tenant.apiKey, baseUrl: live.baseUrl });
    await expect(client.suppressions.list()).resolves.toMatchObject({ data: expect.any(Array) });
  });

  it('without either, the constructor names the variable to set', () => {
    vi.stubEnv('POSTYARD_API_KEY', '');
    vi.stubEnv('POSTYARD_BASE_URL', live.baseUrl);
    expect(() => new Postyard()).toThrow(/POSTYARD_API_KEY/);
    vi.stubEnv('POSTYARD_API_KEY', live.tenant.apiKey);
    vi.stubEnv('POSTYARD_BASE_URL', '');
    expect(() => new Postyard()).toThrow(/POSTYARD_BASE_URL/);
  });
});
