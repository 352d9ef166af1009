/**
 * Text with a lone UTF-16 surrogate (valid JSON: "\udc00") is stored, not a 500: PostgreSQL's
 * json parser refuses such escapes, so no statement may pass request text through a JSON
 * parameter unscrubbed. Found by test/fuzz/dashboard.test.ts on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let t: TestTenant;
beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

describe('lone surrogates in suppression text', () => {
  it('a description holding a lone surrogate is stored (200), never a 500', async () => {
    const res = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: t.apiKey,
      body: {
        items: [
          { identifier: 'lone@example.com', type: 'email', reason_category: 'manual', description: '\udc00 x \ud800' },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const list = await call(ctx.app, 'GET', '/v1/suppressions?identifier=lone@example.com', { key: t.apiKey });
    expect(list.statusCode).toBe(200);
    expect(list.json().data).toHaveLength(1);
  });
});
