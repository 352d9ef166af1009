import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/lib/canonical-json.ts';
import { sha256Hex } from '../../src/lib/crypto.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

let ctx: TestContext;
let t: TestTenant;
let baseUrl: string;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  baseUrl = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => ctx?.close());

const body = (n = 1) => ({
  recipients: Array.from({ length: n }, (_, i) => ({ email: `user${i}@example.com` })),
  content: { subject: 'Hello', text: 'Hi' },
  options: { tags: ['a'], metadata: { x: '1' } },
});

async function countTransmissions() {
  const r = await ctx.c.database.db
    .selectFrom('transmissions')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('tenant_id', '=', t.tenantId)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

describe('Idempotency-Key on POST /v1/transmissions', () => {
  it('replays the stored response for the same key and body (key order and whitespace ignored)', async () => {
    const before = await countTransmissions();
    const first = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'order-1' },
    });
    expect(first.statusCode).toBe(202);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const reordered = JSON.stringify(
      {
        options: { metadata: { x: '1' }, tags: ['a'] },
        content: { text: 'Hi', subject: 'Hello' },
        recipients: [{ email: 'user0@example.com' }],
      },
      null,
      2,
    );
    const again = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: reordered,
      headers: { 'idempotency-key': 'order-1' },
    });
    expect(again.statusCode).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect(await countTransmissions()).toBe(before + 1);
  });

  it('answers 409 idempotency_key_reused for the same key with a different body', async () => {
    await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'order-2' },
    });
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(2),
      headers: { 'idempotency-key': 'order-2' },
    });
    expect(res.statusCode).toBe(409);
    expect(res.json().errors[0].code).toBe('idempotency_key_reused');
  });

  it('scopes keys per tenant', async () => {
    const other = await createTenant(ctx);
    await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'shared' },
    });
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: other.apiKey,
      body: body(3),
      headers: { 'idempotency-key': 'shared' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  it('stores nothing for a 4xx: a corrected retry with the same key executes', async () => {
    const bad = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: 'nope' }], content: { subject: 's', text: 't' } },
      headers: { 'idempotency-key': 'fix-me' },
    });
    expect(bad.statusCode).toBe(422);
    const good = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'fix-me' },
    });
    expect(good.statusCode).toBe(202);
    expect(good.headers['idempotent-replayed']).toBeUndefined();
  });

  it('rejects malformed keys with 400 invalid_idempotency_key', async () => {
    for (const key of ['x'.repeat(256), 'tab\there', 'é']) {
      const res = await call(ctx.app, 'POST', '/v1/transmissions', {
        key: t.apiKey,
        body: body(),
        headers: { 'idempotency-key': key },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().errors[0].code).toBe('invalid_idempotency_key');
    }
  });

  it('lets exactly one of many truly concurrent duplicates run', async () => {
    const before = await countTransmissions();
    const payload = JSON.stringify(body(500));
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        fetch(`${baseUrl}/v1/transmissions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${t.apiKey}`,
            'content-type': 'application/json',
            'idempotency-key': 'concurrent-1',
          },
          body: payload,
        }).then(async (r) => ({
          status: r.status,
          replayed: r.headers.get('idempotent-replayed'),
          body: (await r.json()) as { transmission_id?: string; errors?: { code: string }[] },
        })),
      ),
    );
    const fresh = results.filter((r) => r.status === 202 && r.replayed !== 'true');
    const replays = results.filter((r) => r.status === 202 && r.replayed === 'true');
    const inProgress = results.filter((r) => r.status === 409);
    expect(fresh).toHaveLength(1);
    expect(replays.length + inProgress.length).toBe(11);
    for (const r of inProgress) expect(r.body.errors?.[0]?.code).toBe('idempotency_in_progress');
    for (const r of replays) expect(r.body.transmission_id).toBe(fresh[0]?.body.transmission_id);
    expect(await countTransmissions()).toBe(before + 1);
  });

  it('expires keys after the retention window via the periodic purge', async () => {
    await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'old' },
    });
    await ctx.c.database.db
      .updateTable('idempotency_keys')
      .set({ expires_at: '2000-01-01T00:00:00.000Z' })
      .where('key', '=', 'old')
      .execute();
    expect(await ctx.c.idempotency.purgeExpired()).toBeGreaterThanOrEqual(1);
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(4),
      headers: { 'idempotency-key': 'old' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
  });

  it('takes over a claim abandoned by a crashed request once its lock expires', async () => {
    const scope = 'POST /v1/transmissions';
    const stale = (fingerprint: string, key: string) =>
      ctx.c.database.db
        .insertInto('idempotency_keys')
        .values({
          tenant_id: t.tenantId,
          scope,
          key,
          fingerprint,
          state: 'in_progress',
          response_status: null,
          response_body: null,
          locked_until: '2000-01-01T00:00:00.000Z',
          created_at: new Date().toISOString(),
          expires_at: '2999-01-01T00:00:00.000Z',
        })
        .execute();
    // A dead request with another body still owns the key's meaning: mismatch.
    await stale('other-body', 'crashed-a');
    const mismatch = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'crashed-a' },
    });
    expect(mismatch.json().errors[0].code).toBe('idempotency_key_reused');
    // A dead request with the same body: its expired claim is taken over and the work runs once.
    await stale(sha256Hex(`${scope}\n${canonicalJson(body())}`), 'crashed-b');
    const ok = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: body(),
      headers: { 'idempotency-key': 'crashed-b' },
    });
    expect(ok.statusCode).toBe(202);
    expect(ok.headers['idempotent-replayed']).toBeUndefined();
    const row = await ctx.c.database.db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('key', '=', 'crashed-b')
      .executeTakeFirstOrThrow();
    expect(row.state).toBe('completed');
  });
});
