/** Webhook management API (docs/api.md "Webhooks"): create, secrets, list, PATCH, DELETE, rotate, test, log. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';
import { checkLimitParameter, checkTamperedCursor, walkPages } from '../foundation/paging.ts';
import { createWebhook, deliveriesOf, type Receiver, startReceiver, verify } from './helpers.ts';

let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;
let rx: Receiver;

beforeAll(async () => {
  ctx = await createTestContext();
  a = await createTenant(ctx);
  b = await createTenant(ctx);
  rx = await startReceiver();
});
afterAll(async () => {
  await rx?.close();
  await ctx?.close();
});

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

describe('POST /v1/webhooks', () => {
  it('creates a webhook with defaults and returns a whsec_ secret once, encrypted at rest', async () => {
    const res = await call(ctx.app, 'POST', '/v1/webhooks', { key: a.apiKey, body: { url: rx.url } });
    expect(res.statusCode, res.body).toBe(201);
    const w = res.json() as Record<string, unknown>;
    expect(w).toMatchObject({
      name: '127.0.0.1',
      url: rx.url,
      events: ['*'],
      dispatch_policy: 'single',
      batch_max_size: 100,
      batch_max_wait_ms: 1000,
      enabled: true,
      status: 'active',
      disabled_reason: null,
    });
    expect(w.secret).toMatch(SECRET);
    expect(Buffer.from(String(w.secret).slice(6), 'base64')).toHaveLength(32);
    const row = await ctx.c.database.db
      .selectFrom('webhooks')
      .selectAll()
      .where('id', '=', String(w.id))
      .executeTakeFirstOrThrow();
    expect(row.secret_enc).not.toContain(String(w.secret).slice(6, 20));
    expect(row.secret_enc.startsWith('v1:')).toBe(true);
    const got = await call(ctx.app, 'GET', `/v1/webhooks/${w.id}`, { key: a.apiKey });
    expect(got.json()).not.toHaveProperty('secret');
  });

  it('replays with the same Idempotency-Key: same body, secret null, nothing created twice', async () => {
    const body = { url: rx.url, name: 'idem', events: ['message.delivered', 'message.bounced'] };
    const headers = { 'idempotency-key': 'create-hook-1' };
    const first = await call(ctx.app, 'POST', '/v1/webhooks', { key: a.apiKey, body, headers });
    const second = await call(ctx.app, 'POST', '/v1/webhooks', { key: a.apiKey, body, headers });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(first.json().secret).toMatch(SECRET);
    expect(second.json()).toEqual({ ...first.json(), secret: null });
    const n = await ctx.c.database.db.selectFrom('webhooks').select('id').where('name', '=', 'idem').execute();
    expect(n).toHaveLength(1);
  });

  it('refuses unknown event types, "*" mixed with types, bad URLs and out-of-range batch settings (422 per field)', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ url: rx.url, events: ['message.delivered', 'message.nope'] }, 'events[1]'],
      [{ url: rx.url, events: ['*', 'message.delivered'] }, 'events'],
      [{ url: rx.url, events: [] }, 'events'],
      [{ url: 'ftp://example.com/x' }, 'url'],
      [{ url: 'not a url' }, 'url'],
      [{ url: 'https://user:pw@example.com/x' }, 'url'],
      [{ url: rx.url, batch_max_size: 0 }, 'batch_max_size'],
      [{ url: rx.url, batch_max_size: 1001 }, 'batch_max_size'],
      [{ url: rx.url, batch_max_wait_ms: -1 }, 'batch_max_wait_ms'],
      [{ url: rx.url, dispatch_policy: 'fifo' }, 'dispatch_policy'],
      [{ url: rx.url, surprise: 1 }, 'surprise'],
      [{}, 'url'],
    ];
    for (const [body, field] of cases) {
      const res = await call(ctx.app, 'POST', '/v1/webhooks', { key: a.apiKey, body });
      const err = expectError(res, 422, 'validation_failed');
      expect(
        err.errors.map((e) => (e as { field?: string }).field),
        JSON.stringify(body),
      ).toContain(field);
    }
  });

  it('needs manage:webhooks', async () => {
    const key = await keyWithScopes(ctx, a.tenantId, ['read:events']);
    expectError(await call(ctx.app, 'POST', '/v1/webhooks', { key, body: { url: rx.url } }), 403, 'insufficient_scope');
    expectError(await call(ctx.app, 'GET', '/v1/webhooks', { key }), 403, 'insufficient_scope');
  });
});

describe('list, get, PATCH, DELETE', () => {
  it('lists newest first with keyset cursors, and validates limit and cursor', async () => {
    const t = await createTenant(ctx);
    for (let i = 0; i < 7; i++) await createWebhook(ctx, t.apiKey, { url: rx.url, name: `w${i}` });
    const { ids } = await walkPages(ctx, '/v1/webhooks', t.apiKey, 3);
    expect(ids).toHaveLength(7);
    expect([...ids].sort().reverse()).toEqual(ids);
    await checkLimitParameter(ctx, '/v1/webhooks', t.apiKey);
    const page = (await call(ctx.app, 'GET', '/v1/webhooks', { key: t.apiKey, query: { limit: '2' } })).json();
    await checkTamperedCursor(ctx, '/v1/webhooks', t.apiKey, page.next_cursor);
  });

  it('PATCH changes fields, keeps the rest, and validates like create', async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url, name: 'p' });
    const res = await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, {
      key: a.apiKey,
      body: { events: ['message.bounced'], dispatch_policy: 'batch', batch_max_size: 10, batch_max_wait_ms: 200 },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      name: 'p',
      url: rx.url,
      events: ['message.bounced'],
      dispatch_policy: 'batch',
      batch_max_size: 10,
    });
    expect(res.json().updated_at >= String(w.updated_at)).toBe(true);
    expectError(
      await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: a.apiKey, body: { events: ['x'] } }),
      422,
      'validation_failed',
    );
    expectError(
      await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: a.apiKey, body: { url: 'gopher://x' } }),
      422,
      'validation_failed',
    );
    expectError(
      await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: a.apiKey, body: { secret: 'x' } }),
      422,
      'validation_failed',
    );
  });

  it('PATCH enabled:false disables (status disabled) and enabled:true re-activates', async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url });
    const off = await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: a.apiKey, body: { enabled: false } });
    expect(off.json()).toMatchObject({ enabled: false, status: 'disabled', disabled_reason: 'disabled by API' });
    const on = await call(ctx.app, 'PATCH', `/v1/webhooks/${w.id}`, { key: a.apiKey, body: { enabled: true } });
    expect(on.json()).toMatchObject({ enabled: true, status: 'active', disabled_reason: null });
  });

  it('DELETE removes it (204, then 404)', async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url });
    expect((await call(ctx.app, 'DELETE', `/v1/webhooks/${w.id}`, { key: a.apiKey })).statusCode).toBe(204);
    expectError(await call(ctx.app, 'GET', `/v1/webhooks/${w.id}`, { key: a.apiKey }), 404, 'not_found');
    expectError(await call(ctx.app, 'DELETE', `/v1/webhooks/${w.id}`, { key: a.apiKey }), 404, 'not_found');
  });

  it("another tenant's webhook is a 404 on every route, and never listed", async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url, name: 'private-to-a' });
    for (const [method, suffix, body] of [
      ['GET', '', undefined],
      ['PATCH', '', { name: 'x' }],
      ['DELETE', '', undefined],
      ['POST', '/rotate-secret', undefined],
      ['POST', '/test', undefined],
      ['GET', '/deliveries', undefined],
    ] as const) {
      const res = await call(ctx.app, method, `/v1/webhooks/${w.id}${suffix}`, {
        key: b.apiKey,
        ...(body ? { body } : {}),
      });
      expectError(res, 404, 'not_found');
    }
    const list = (await call(ctx.app, 'GET', '/v1/webhooks', { key: b.apiKey, query: { limit: '1000' } })).json();
    expect(list.data.map((x: { id: string }) => x.id)).not.toContain(w.id);
    expect((await call(ctx.app, 'GET', `/v1/webhooks/${w.id}`, { key: a.apiKey })).json().name).toBe('private-to-a');
  });
});

describe('POST /v1/webhooks/:id/test', () => {
  it('sends a signed webhook.test event now and reports the outcome; logged as a test attempt', async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url, events: ['message.delivered'] });
    const before = rx.received.length;
    const res = await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/test`, { key: a.apiKey });
    expect(res.statusCode, res.body).toBe(200);
    const out = res.json();
    expect(out).toMatchObject({ delivered: true, status_code: 200, error: null });
    expect(typeof out.duration_ms).toBe('number');
    const rec = rx.received[before];
    expect(rec).toBeDefined();
    const event = verify(w.secret, rec!) as Record<string, unknown>;
    expect(event).toMatchObject({ type: 'webhook.test', tenant_id: a.tenantId, tags: [], metadata: {}, data: {} });
    expect(rec!.headers['webhook-id']).toBe(event.id);
    const log = await deliveriesOf(ctx, a.apiKey, w.id);
    expect(log[0]).toMatchObject({
      test: true,
      outcome: 'delivered',
      status_code: 200,
      attempt: 1,
      event_ids: [event.id],
    });
  });

  it('reports a failure as a value (status code and error), batch webhooks get a batch body', async () => {
    const failing = await startReceiver(() => ({ status: 500, body: 'boom' }));
    try {
      const w = await createWebhook(ctx, a.apiKey, { url: failing.url, dispatch_policy: 'batch' });
      const out = (await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/test`, { key: a.apiKey })).json();
      expect(out).toMatchObject({ delivered: false, status_code: 500 });
      expect(out.error).toContain('500');
      const body = verify(w.secret, failing.received[0]!) as { batch_id: string; events: { type: string }[] };
      expect(body.events.map((e) => e.type)).toEqual(['webhook.test']);
      expect(failing.received[0]!.headers['webhook-id']).toBe(body.batch_id);
    } finally {
      await failing.close();
    }
    const w2 = await createWebhook(ctx, a.apiKey, { url: 'http://127.0.0.1:9/closed' });
    const out2 = (await call(ctx.app, 'POST', `/v1/webhooks/${w2.id}/test`, { key: a.apiKey })).json();
    expect(out2).toMatchObject({ delivered: false, status_code: null });
    expect(out2.error).toMatch(/ECONNREFUSED/);
  });

  it('is idempotent: a replay returns the stored answer without sending again', async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url });
    const headers = { 'idempotency-key': `test-${w.id}` };
    const before = rx.received.length;
    const first = await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/test`, { key: a.apiKey, headers });
    const second = await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/test`, { key: a.apiKey, headers });
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.json()).toEqual(first.json());
    expect(rx.received.length - before).toBe(1);
  });
});

describe('POST /v1/webhooks/:id/rotate-secret', () => {
  it('returns a new secret; both sign for 24 h, then only the new one', async () => {
    const w = await createWebhook(ctx, a.apiKey, { url: rx.url });
    const res = await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/rotate-secret`, { key: a.apiKey });
    expect(res.statusCode, res.body).toBe(200);
    const { secret, previous_secret_expires_at } = res.json();
    expect(secret).toMatch(SECRET);
    expect(secret).not.toBe(w.secret);
    const ttl = Date.parse(previous_secret_expires_at) - Date.now();
    expect(ttl).toBeGreaterThan(23.9 * 3600_000);
    expect(ttl).toBeLessThanOrEqual(24 * 3600_000);

    const before = rx.received.length;
    await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/test`, { key: a.apiKey });
    const rec = rx.received[before]!;
    expect(String(rec.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(secret, rec)).toBeTruthy(); // receivers that already switched
    expect(verify(w.secret, rec)).toBeTruthy(); // receivers still on the old secret

    // After the overlap only the new secret signs.
    await ctx.c.database.db
      .updateTable('webhooks')
      .set({ previous_secret_expires_at: new Date(Date.now() - 1000).toISOString() })
      .where('id', '=', w.id)
      .execute();
    await call(ctx.app, 'POST', `/v1/webhooks/${w.id}/test`, { key: a.apiKey });
    const last = rx.received[rx.received.length - 1]!;
    expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verify(secret, last)).toBeTruthy();
    expect(() => verify(w.secret, last)).toThrow(/signature/i);
  });
});
