/**
 * The accept path keeps the tenant's tracking defaults for a few seconds
 * (src/modules/transmissions/tracking-cache.ts); a PATCH on this node is seen by its next accept.
 * Both backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let t: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

async function acceptOptions(): Promise<Record<string, unknown>> {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', {
    key: t.apiKey,
    body: {
      recipients: [{ email: 'ann@cache.example' }],
      content: { subject: 'Hi', html: '<a href="https://shop.example/">x</a>' },
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  const tx = await ctx.c.database.db
    .selectFrom('transmissions')
    .select(['options'])
    .where('id', '=', res.json().transmission_id as string)
    .executeTakeFirstOrThrow();
  return JSON.parse(tx.options) as Record<string, unknown>;
}

async function patch(body: unknown) {
  const res = await call(ctx.app, 'PATCH', '/v1/tracking-settings', { key: t.apiKey, body });
  expect(res.statusCode, res.body).toBe(200);
}

describe('tracking defaults on the accept path', () => {
  it('an accept right after PATCH /v1/tracking-settings on this node uses the new defaults', async () => {
    // Cached by this accept (transactional: built-in off).
    expect(await acceptOptions()).toMatchObject({ open_tracking: false, click_tracking: false });
    await patch({ open_tracking: { transactional: true }, click_tracking: { transactional: true } });
    expect(await acceptOptions()).toMatchObject({ open_tracking: true, click_tracking: true });
    await patch({ click_tracking: { transactional: false } });
    expect(await acceptOptions()).toMatchObject({ open_tracking: true, click_tracking: false });
  });

  it('a change made behind this node (another node, straight in the database) is seen once the entry expires', async () => {
    await acceptOptions();
    await ctx.c.database.db
      .updateTable('tenants')
      .set({ tracking_settings: JSON.stringify({ open_tracking: { transactional: false } }) })
      .where('id', '=', t.tenantId)
      .execute();
    // Within the TTL this node may still apply the old value (documented staleness); forgetting
    // the entry stands for its expiry without waiting 5 s in a test.
    ctx.c.transmissions.trackingDefaults.forget(t.tenantId);
    expect(await acceptOptions()).toMatchObject({ open_tracking: false, click_tracking: false });
  });
});
