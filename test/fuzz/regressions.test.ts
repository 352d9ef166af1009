/**
 * Counterexamples the bad-input properties found, kept as plain tests (each was a 500, or an
 * answer without the contract's error body, before its fix in src/http/input-guard.ts,
 * src/http/server-options.ts or src/http/error-handler.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedInUser } from '../dashboard/helpers.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { webhookId } from '../webhooks/routes.ts';
import { checkAnswer } from './harness.ts';
import { expectContractError, parseResponse, rawExchange } from './raw-http.ts';

let ctx: TestContext;
let t: TestTenant;
beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

async function expectError(
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  body: string | undefined,
  status: number,
  code: string,
  field?: string,
) {
  const res = await call(ctx.app, method, url, { key: t.apiKey, ...(body !== undefined ? { body } : {}) });
  checkAnswer({ method, url, ...(body !== undefined ? { payload: body } : {}) }, res);
  const err = (res.json() as { errors: { code: string; field?: string }[] }).errors[0];
  expect([res.statusCode, err?.code, err?.field]).toEqual([status, code, field]);
}

const tx = (substitution: string) =>
  `{"recipients":[{"email":"a@example.com","substitution_data":{"x":${substitution}}}],"content":{"subject":"s","text":"t"}}`;
const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('JSON nesting depth (was: stack overflow, 500)', () => {
  it('substitution_data nested 20,000 levels deep: 400 invalid_json', async () => {
    await expectError('POST', '/v1/transmissions', tx(nested(20_000)), 400, 'invalid_json');
  });

  it('up to 64 levels in all are accepted, 65 are not', async () => {
    // root object, recipients array, recipient object, substitution_data object: 4 levels.
    const ok = await call(ctx.app, 'POST', '/v1/transmissions', { key: t.apiKey, body: tx(nested(60)) });
    expect(ok.statusCode, ok.body).toBe(202);
    await expectError('POST', '/v1/transmissions', tx(nested(61)), 400, 'invalid_json');
  });

  it('with an Idempotency-Key (canonical JSON of the body) too', async () => {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: tx(nested(20_000)),
      headers: { 'idempotency-key': 'deep-1' },
    });
    expect(res.statusCode).toBe(400);
  });
});

describe('NUL characters (was: 500 on PostgreSQL, stored on SQLite)', () => {
  it('in a name: 422 naming the field', async () => {
    await expectError(
      'POST',
      '/v1/api-keys',
      '{"name":"a\\u0000b","scopes":["read:events"]}',
      422,
      'validation_failed',
      'name',
    );
    await expectError('POST', '/v1/smtp-credentials', '{"name":"a\\u0000b"}', 422, 'validation_failed', 'name');
    const hook = await webhookId(ctx, t);
    await expectError('PATCH', `/v1/webhooks/${hook}`, '{"name":"\\u0000"}', 422, 'validation_failed', 'name');
  });

  it('in a nested value or key: 422 naming the path', async () => {
    await expectError(
      'POST',
      '/v1/transmissions',
      '{"recipients":[{"email":"a@example.com","metadata":{"k":"v\\u0000"}}],"content":{"subject":"s","text":"t"}}',
      422,
      'validation_failed',
      'recipients[0].metadata.k',
    );
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: '{"recipients":[{"email":"a@example.com"}],"content":{"subject":"s","text":"t"},"options":{"metadata":{"\\u0000":"x"}}}',
    });
    expect(res.statusCode).toBe(422);
  });

  it('in a path id: 404 like any unknown id', async () => {
    await expectError('GET', '/v1/transmissions/%00', undefined, 404, 'not_found');
    await expectError('GET', '/v1/suppressions/%00', undefined, 404, 'not_found');
    await expectError('DELETE', '/v1/api-keys/a%00b', undefined, 404, 'not_found');
  });

  it('in a query parameter: 400 invalid_parameter', async () => {
    await expectError('GET', '/v1/suppressions?identifier=%00', undefined, 400, 'invalid_parameter', 'identifier');
  });

  it('in the dashboard API too', async () => {
    const user = await signedInUser(ctx);
    const res = await user.client.post('/dashboard/api/api-keys', { name: 'a\u0000b', scopes: ['read:events'] });
    checkAnswer({ method: 'POST', url: '/dashboard/api/api-keys' }, res, { dashboard: true });
    expect(res.statusCode).toBe(422);
  });
});

describe('CSV imports', () => {
  const B = 'regressionB';
  const head = `--${B}\r\nContent-Disposition: form-data; name="file"; filename="s.csv"\r\nContent-Type: text/csv\r\n\r\n`;

  it('a multipart body cut before its final boundary, on the dashboard: 422 on file (was: 500 "Premature close")', async () => {
    const user = await signedInUser(ctx);
    const res = await user.client.request('POST', '/dashboard/api/suppressions/import', {
      headers: { 'content-type': `multipart/form-data; boundary=${B}` },
      raw: `${head}identifier\r`,
    });
    checkAnswer({ method: 'POST', url: '/dashboard/api/suppressions/import' }, res, { dashboard: true });
    const err = (res.json() as { errors: { code: string; field?: string }[] }).errors[0];
    expect([res.statusCode, err?.code, err?.field]).toEqual([422, 'validation_failed', 'file']);
  });

  it('a NUL inside a CSV field: the row is skipped and reported (was: 500 for the whole import on PostgreSQL)', async () => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/v1/suppressions',
      headers: { authorization: `Bearer ${t.apiKey}`, 'content-type': `multipart/form-data; boundary=${B}` },
      payload: `${head}identifier,description\nnul@example.com,a\u0000b\nn\u0000l@example.com,x\nok@example.com,fine\r\n--${B}--\r\n`,
    });
    checkAnswer({ method: 'POST', url: '/v1/suppressions' }, res);
    expect(res.statusCode).toBe(200);
    const body = res.json() as { imported: number; skipped: number; errors: { line: number; message: string }[] };
    expect([body.imported, body.skipped, body.errors.map((e) => e.line)]).toEqual([1, 2, [2, 3]]);
    expect(body.errors[0]?.message).toMatch(/NUL/);
  });

  it('a bounce whose remote text holds a NUL still becomes a suppression', async () => {
    const rec = await ctx.c.suppressions.addAutomatic(ctx.c.database.db, t.tenantId, {
      identifier: 'bounced@example.com',
      reason_category: 'hard_bounce',
      source: 'bounce',
      description: '550 5.1.1 no such user\u0000here',
    });
    expect(rec.description).toBe('550 5.1.1 no such userhere');
  });
});

describe('malformed HTTP (was: Node or Fastify bodies outside the contract)', () => {
  let port = 0;
  beforeAll(async () => {
    port = Number(new URL(await ctx.app.listen({ port: 0, host: '127.0.0.1' })).port);
  });

  it('HTTP/1.1 without Host: 400 invalid_request (was an empty body)', async () => {
    const r = await rawExchange(port, `GET /v1/ HTTP/1.1\r\nAuthorization: Bearer ${t.apiKey}\r\n\r\n`, { end: true });
    expectContractError(parseResponse(r.response), 400, 'invalid_request');
  });

  it('a control byte in the request line: 400 invalid_request', async () => {
    const r = await rawExchange(port, 'GET /he\u0001lthz HTTP/1.1\r\nHost: t\r\n\r\n', { end: true });
    expectContractError(parseResponse(r.response), 400, 'invalid_request');
  });

  it('headers over 16 KB: 431 invalid_request', async () => {
    const r = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: t\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`, {
      end: true,
    });
    expectContractError(parseResponse(r.response), 431, 'invalid_request');
  });
});
