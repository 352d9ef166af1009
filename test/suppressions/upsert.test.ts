/**
 * POST /v1/suppressions with JSON (docs/api.md "POST /v1/suppressions"): upsert, normalization,
 * all-or-nothing, idempotency.
 */
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

interface Record_ {
  id: string;
  identifier: string;
  type: string;
  reason_category: string;
  description: string | null;
  source: string;
  created_at: string;
  updated_at: string;
}

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

function post(t: TestTenant, body: unknown, headers: Record<string, string> = {}) {
  return call(ctx.app, 'POST', '/v1/suppressions', { key: t.apiKey, body, headers });
}

async function all(t: TestTenant, query: Record<string, string> = {}): Promise<Record_[]> {
  const res = await call(ctx.app, 'GET', '/v1/suppressions', { key: t.apiKey, query: { limit: '1000', ...query } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { data: Record_[] }).data;
}

async function count(tenantId: string): Promise<number> {
  const row = await ctx.c.database.db
    .selectFrom('suppressions')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const item = (identifier: string, extra: Record<string, unknown> = {}) => ({
  identifier,
  type: 'email',
  reason_category: 'manual',
  ...extra,
});

describe('upsert', () => {
  it('creates, then updates: counts, record shape, kept id and created_at', async () => {
    const t = await createTenant(ctx);
    const first = await post(t, {
      items: [
        item('ann@example.com', { description: 'asked by phone' }),
        { identifier: 'example.org', type: 'domain', reason_category: 'complaint' },
      ],
    });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toEqual({ created: 2, updated: 0 });

    const before = await all(t);
    expect(before).toHaveLength(2);
    const ann = before.find((r) => r.identifier === 'ann@example.com');
    expect(ann).toBeDefined();
    expect(Object.keys(ann ?? {}).sort()).toEqual(
      [
        'created_at',
        'description',
        'id',
        'identifier',
        'reason_category',
        'scope',
        'source',
        'type',
        'updated_at',
      ].sort(),
    );
    expect(ann).toMatchObject({
      type: 'email',
      reason_category: 'manual',
      description: 'asked by phone',
      source: 'api',
    });
    expect(ann?.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(ann?.updated_at).toBe(ann?.created_at);

    await new Promise((r) => setTimeout(r, 5));
    const second = await post(t, {
      items: [item('ann@EXAMPLE.com', { reason_category: 'unsubscribe' }), item('bob@example.com')],
    });
    expect(second.json()).toEqual({ created: 1, updated: 1 });
    const after = await all(t);
    expect(after).toHaveLength(3);
    const ann2 = after.find((r) => r.identifier === 'ann@example.com');
    expect(ann2?.id).toBe(ann?.id);
    expect(ann2?.created_at).toBe(ann?.created_at);
    expect(ann2?.reason_category).toBe('unsubscribe');
    // The upsert replaces the description too: not given means none.
    expect(ann2?.description).toBeNull();
    expect((ann2?.updated_at ?? '') > (ann?.updated_at ?? '')).toBe(true);

    // The same values again: it matched (counted as updated) but nothing changed, so updated_at stays.
    await new Promise((r) => setTimeout(r, 5));
    const same = await post(t, { items: [item('ann@example.com', { reason_category: 'unsubscribe' })] });
    expect(same.json()).toEqual({ created: 0, updated: 1 });
    const ann3 = (await all(t)).find((r) => r.identifier === 'ann@example.com');
    expect(ann3?.updated_at).toBe(ann2?.updated_at);
  });

  it('normalizes identifiers: trimmed, email addresses and domains lower-cased (local part too, issue 13)', async () => {
    const t = await createTenant(ctx);
    const res = await post(t, {
      items: [
        item('  Bob.Smith@Mail.Example.COM  '),
        item('bob.smith@mail.example.com'), // the same address in another case: one entry
        { identifier: ' Example.NET ', type: 'domain', reason_category: 'manual' },
      ],
    });
    expect(res.json()).toEqual({ created: 2, updated: 0 });
    const ids = (await all(t)).map((r) => r.identifier).sort();
    expect(ids).toEqual(['bob.smith@mail.example.com', 'example.net']);
    // The same identity again, spelled differently: an update.
    const again = await post(t, { items: [item('Bob.Smith@MAIL.example.com')] });
    expect(again.json()).toEqual({ created: 0, updated: 1 });
  });

  it('the same identifier as email and as domain are two entries; repeats in one request count once', async () => {
    const t = await createTenant(ctx);
    const res = await post(t, {
      items: [
        item('x@dup.example'),
        item('x@DUP.example', { reason_category: 'complaint' }),
        { identifier: 'dup.example', type: 'domain', reason_category: 'manual' },
      ],
    });
    expect(res.json()).toEqual({ created: 2, updated: 0 });
    const rows = await all(t);
    expect(rows.find((r) => r.type === 'email')?.reason_category).toBe('complaint'); // last one wins
  });

  it('is all or nothing: one bad item is a 422 naming items[i] and nothing is written', async () => {
    const t = await createTenant(ctx);
    const items = [
      item('a@example.com'),
      item('b@example.com'),
      item('c@example.com'),
      item('not-an-address'),
      item('e@example.com'),
    ];
    const res = await post(t, { items });
    const body = expectError(res, 422, 'validation_failed');
    expect(body.errors.map((e) => (e as { field?: string }).field)).toEqual(['items[3].identifier']);
    expect(body.errors[0]?.message).toContain('not-an-address');
    expect(await count(t.tenantId)).toBe(0);
  });

  it('names every bad item and field', async () => {
    const t = await createTenant(ctx);
    const res = await post(t, {
      items: [
        item('ok@example.com'),
        { identifier: 'bad_domain!', type: 'domain', reason_category: 'manual' },
        item('x@example.com', { type: 'phone' }),
        item('y@example.com', { reason_category: 'because' }),
        { identifier: 'z@example.com', type: 'email' },
        item('w@example.com', { colour: 'red' }),
        item('   '),
        item('v@example.com', { description: 'x'.repeat(1025) }),
      ],
    });
    const body = expectError(res, 422, 'validation_failed');
    const fields = body.errors.map((e) => (e as { field?: string }).field).sort();
    expect(fields).toEqual(
      [
        'items[2].type',
        'items[3].reason_category',
        'items[4].reason_category',
        'items[5].colour',
        'items[7].description',
      ].sort(),
    );
    // Schema-valid but semantically bad items are reported the same way.
    const res2 = await post(t, {
      items: [
        item('ok@example.com'),
        { identifier: 'bad_domain!', type: 'domain', reason_category: 'manual' },
        item('   '),
        { identifier: 'user@example.com', type: 'domain', reason_category: 'manual' },
      ],
    });
    const body2 = expectError(res2, 422, 'validation_failed');
    expect(body2.errors.map((e) => (e as { field?: string }).field)).toEqual([
      'items[1].identifier',
      'items[2].identifier',
      'items[3].identifier',
    ]);
    expect(await count(t.tenantId)).toBe(0);
  });

  it('accepts 10,000 items in one request and refuses 10,001', async () => {
    const t = await createTenant(ctx);
    const items = Array.from({ length: 10_000 }, (_, i) => item(`user${i}@Bulk${i % 10}.example.com`));
    const started = Date.now();
    const res = await post(t, { items });
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    expect(res.json()).toEqual({ created: 10_000, updated: 0 });
    expect(await count(t.tenantId)).toBe(10_000);
    // Same 10,000 again: all updates.
    const again = await post(t, { items: items.map((i) => ({ ...i, reason_category: 'hard_bounce' })) });
    expect(again.json()).toEqual({ created: 0, updated: 10_000 });
    expect(Date.now() - started).toBeLessThan(20_000);

    const tooMany = await post(t, { items: [...items, item('one-more@example.com')] });
    const body = expectError(tooMany, 422, 'validation_failed');
    expect((body.errors[0] as { field?: string }).field).toBe('items');
    expect(await count(t.tenantId)).toBe(10_000);
  });

  it('refuses an empty list, a missing list, and a non-JSON body', async () => {
    const t = await createTenant(ctx);
    expectError(await post(t, { items: [] }), 422, 'validation_failed');
    expectError(await post(t, {}), 422, 'validation_failed');
    expectError(await post(t, '{"items": ['), 400, 'invalid_json');
    expectError(
      await call(ctx.app, 'POST', '/v1/suppressions', {
        key: t.apiKey,
        body: 'identifier\na@example.com\n',
        headers: { 'content-type': 'text/csv' },
      }),
      415,
      'unsupported_media_type',
    );
  });

  it('needs the manage:suppressions scope', async () => {
    const t = await createTenant(ctx);
    const other = await keyWithScopes(ctx, t.tenantId, ['read:events']);
    const res = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: other,
      body: { items: [item('a@example.com')] },
    });
    expectError(res, 403, 'insufficient_scope');
    expect(res.json().errors[0].message).toContain('manage:suppressions');
    const list = await call(ctx.app, 'GET', '/v1/suppressions', { key: other });
    expectError(list, 403, 'insufficient_scope');
  });
});

describe('idempotency', () => {
  it('replays the stored answer for the same key and body, and nothing happens twice', async () => {
    const t = await createTenant(ctx);
    const headers = { 'idempotency-key': 'sup-import-1' };
    const first = await post(t, { items: [item('a@example.com'), item('b@example.com')] }, headers);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ created: 2, updated: 0 });
    const before = await all(t);

    // Same body, other key order and spacing: a replay (a re-run would say updated: 2).
    const replay = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: t.apiKey,
      headers,
      body: '{ "items": [ {"type":"email","identifier":"a@example.com","reason_category":"manual"},\n {"reason_category":"manual","identifier":"b@example.com","type":"email"} ] }',
    });
    expect(replay.statusCode).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual({ created: 2, updated: 0 });
    expect(await all(t)).toEqual(before);

    const reused = await post(t, { items: [item('c@example.com')] }, headers);
    expectError(reused, 409, 'idempotency_key_reused');
    expect(await count(t.tenantId)).toBe(2);
  });

  it('stores nothing for a request rejected by validation: the key stays usable', async () => {
    const t = await createTenant(ctx);
    const headers = { 'idempotency-key': 'sup-bad-then-good' };
    expectError(await post(t, { items: [item('nope')] }, headers), 422, 'validation_failed');
    const ok = await post(t, { items: [item('fine@example.com')] }, headers);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ created: 1, updated: 0 });
  });
});

describe('OpenAPI', () => {
  it('documents both request bodies of POST /v1/suppressions', async () => {
    const res = await call(ctx.app, 'GET', '/v1/openapi.json');
    const doc = res.json() as {
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }>>;
    };
    const content = doc.paths['/v1/suppressions']?.post?.requestBody?.content ?? {};
    expect(Object.keys(content).sort()).toEqual(['application/json', 'multipart/form-data']);
    expect(JSON.stringify(content['multipart/form-data'])).toContain('"file"');
    expect(JSON.stringify(content['application/json'])).toContain('"items"');
    expect(doc.paths['/v1/suppressions/{id}']?.get).toBeDefined();
    expect(doc.paths['/v1/suppressions/{id}']?.delete).toBeDefined();
  });
});
