/**
 * SMTP credentials (docs/api.md "SMTP credentials", docs/smtp.md "Connecting"): the password is
 * shown once and stored as an scrypt hash.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { call, createTenant, type TestContext, type TestTenant } from '../helpers/context.ts';
import { secretResourceFixture } from '../helpers/issued-secrets.ts';
import { expectError } from '../helpers/security-suite.ts';
import { checkLimitParameter, checkTamperedCursor, type Page, walkPages } from './paging.ts';

interface Created {
  id: string;
  name: string;
  username: string;
  password: string | null;
  created_at: string;
  last_used_at: string | null;
}

const fx = secretResourceFixture('/v1/smtp-credentials', 'smtp_credentials');
const { create, dbRow } = fx;
let ctx: TestContext;
let tenant: TestTenant;
beforeAll(() => {
  ({ ctx, tenant } = fx);
});

describe('POST /v1/smtp-credentials', () => {
  it('returns username and password once; the password is stored as an scrypt hash', async () => {
    const res = await create(tenant.apiKey, { name: 'app server' });
    expect(res.statusCode, res.body).toBe(201);
    const cred = res.json() as Created;
    expect(cred.name).toBe('app server');
    expect(cred.username.length).toBeGreaterThanOrEqual(8);
    expect(cred.password?.length ?? 0).toBeGreaterThanOrEqual(24);
    expect(cred.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(cred.last_used_at).toBeNull();

    const row = await dbRow(cred.id);
    expect(row.tenant_id).toBe(tenant.tenantId);
    expect(row.username).toBe(cred.username);
    expect(row.password_hash).toMatch(/^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(JSON.stringify(row)).not.toContain(cred.password as string);
  });

  it('usernames and passwords are unique per credential', async () => {
    const a = (await create(tenant.apiKey, { name: 'a' })).json() as Created;
    const b = (await create(tenant.apiKey, { name: 'a' })).json() as Created;
    expect(a.username).not.toBe(b.username);
    expect(a.password).not.toBe(b.password);
    expect(a.id).not.toBe(b.id);
  });

  it('422 naming the field for a bad name or unknown fields', async () => {
    const cases: [unknown, string][] = [
      [{}, 'name'],
      [{ name: '' }, 'name'],
      [{ name: '   ' }, 'name'],
      [{ name: 7 }, 'name'],
      [{ name: 'x'.repeat(201) }, 'name'],
      [{ name: 'x', password: 'mine' }, 'password'],
    ];
    for (const [body, field] of cases) {
      const b = expectError(await create(tenant.apiKey, body), 422, 'validation_failed');
      expect(
        b.errors.map((e: { field?: string }) => e.field),
        JSON.stringify(body),
      ).toContain(field);
    }
  });
});

describe('verify (the SMTP server AUTH check)', () => {
  it('accepts the right password and refuses a wrong one or an unknown username', async () => {
    const cred = (await create(tenant.apiKey, { name: 'verify' })).json() as Created;
    const ok = await ctx.c.smtpCredentials.verify(cred.username, cred.password as string);
    expect(ok).toEqual({ tenantId: tenant.tenantId, credentialId: cred.id });
    expect(await ctx.c.smtpCredentials.verify(cred.username, `${cred.password}x`)).toBeNull();
    expect(await ctx.c.smtpCredentials.verify(cred.username, '')).toBeNull();
    expect(await ctx.c.smtpCredentials.verify(cred.username, (cred.password as string).toUpperCase())).toBeNull();
    expect(await ctx.c.smtpCredentials.verify(`${cred.username}x`, cred.password as string)).toBeNull();
    expect(await ctx.c.smtpCredentials.verify('', '')).toBeNull();
  });

  it('records last_used_at on a successful verify only', async () => {
    const cred = (await create(tenant.apiKey, { name: 'used' })).json() as Created;
    const lastUsed = async () =>
      (
        await ctx.c.database.db
          .selectFrom('smtp_credentials')
          .select('last_used_at')
          .where('id', '=', cred.id)
          .executeTakeFirstOrThrow()
      ).last_used_at;
    await ctx.c.smtpCredentials.verify(cred.username, 'wrong-password');
    expect(await lastUsed()).toBeNull();
    await ctx.c.smtpCredentials.verify(cred.username, cred.password as string);
    expect(await lastUsed()).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });

  it('a deleted credential fails verify', async () => {
    const cred = (await create(tenant.apiKey, { name: 'gone' })).json() as Created;
    expect(await ctx.c.smtpCredentials.verify(cred.username, cred.password as string)).not.toBeNull();
    const del = await call(ctx.app, 'DELETE', `/v1/smtp-credentials/${cred.id}`, { key: tenant.apiKey });
    expect(del.statusCode).toBe(204);
    expect(await ctx.c.smtpCredentials.verify(cred.username, cred.password as string)).toBeNull();
  });
});

describe('GET /v1/smtp-credentials', () => {
  it('never shows the password or its hash; only the tenant own credentials', async () => {
    const t = await createTenant(ctx);
    const cred = (await create(t.apiKey, { name: 'listed' })).json() as Created;
    await create(tenant.apiKey, { name: 'not theirs' });
    const res = await call(ctx.app, 'GET', '/v1/smtp-credentials', { key: t.apiKey });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(cred.password as string);
    expect(res.body).not.toContain('scrypt$');
    const page = res.json() as { data: Record<string, unknown>[]; next_cursor: string | null };
    expect(page.data).toHaveLength(1);
    expect(page.next_cursor).toBeNull();
    expect(page.data[0]).toEqual({
      id: cred.id,
      name: 'listed',
      username: cred.username,
      created_at: cred.created_at,
      last_used_at: null,
    });
  });

  it('paginates with limit and cursor without gaps or duplicates', async () => {
    const t = await createTenant(ctx);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(((await create(t.apiKey, { name: `c${i}` })).json() as Created).id);
    for (const limit of [1, 2, 3, 7, 100]) {
      const walk = await walkPages(ctx, '/v1/smtp-credentials', t.apiKey, limit);
      expect(walk.ids).toHaveLength(7);
      expect(new Set(walk.ids)).toEqual(new Set(ids));
      expect(walk.pages).toBe(Math.ceil(7 / limit));
    }
  });

  it('limit 0 / 1001 are 400 invalid_parameter; a tampered cursor is 400 invalid_cursor', async () => {
    await checkLimitParameter(ctx, '/v1/smtp-credentials', tenant.apiKey);
    const first = (
      await call(ctx.app, 'GET', '/v1/smtp-credentials', { key: tenant.apiKey, query: { limit: '1' } })
    ).json() as Page;
    expect(first.next_cursor).toBeTruthy();
    await checkTamperedCursor(ctx, '/v1/smtp-credentials', tenant.apiKey, first.next_cursor as string);
  });
});

describe('DELETE /v1/smtp-credentials/:id', () => {
  it('204 then 404; another tenant gets 404 and the credential keeps working', async () => {
    const other = await createTenant(ctx);
    const cred = (await create(tenant.apiKey, { name: 'del' })).json() as Created;
    expectError(
      await call(ctx.app, 'DELETE', `/v1/smtp-credentials/${cred.id}`, { key: other.apiKey }),
      404,
      'not_found',
    );
    expect(await ctx.c.smtpCredentials.verify(cred.username, cred.password as string)).not.toBeNull();
    expect((await call(ctx.app, 'DELETE', `/v1/smtp-credentials/${cred.id}`, { key: tenant.apiKey })).statusCode).toBe(
      204,
    );
    expectError(
      await call(ctx.app, 'DELETE', `/v1/smtp-credentials/${cred.id}`, { key: tenant.apiKey }),
      404,
      'not_found',
    );
    const list = await walkPages(ctx, '/v1/smtp-credentials', tenant.apiKey, 1000);
    expect(list.ids).not.toContain(cred.id);
  });
});

describe('Idempotency-Key on POST /v1/smtp-credentials', () => {
  it('a replay returns the same credential with password: null; a different body is 409', async () => {
    const t = await createTenant(ctx);
    const headers = { 'idempotency-key': 'smtp-create-1' };
    const first = await create(t.apiKey, { name: 'idem' }, headers);
    expect(first.statusCode).toBe(201);
    const a = first.json() as Created;
    const second = await create(t.apiKey, { name: 'idem' }, headers);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    const b = second.json() as Created;
    expect(b).toEqual({ ...a, password: null });
    expect((await walkPages(ctx, '/v1/smtp-credentials', t.apiKey, 1000)).ids).toEqual([a.id]);
    // The first password still works; nothing was re-generated.
    expect(await ctx.c.smtpCredentials.verify(a.username, a.password as string)).not.toBeNull();
    expectError(await create(t.apiKey, { name: 'other' }, headers), 409, 'idempotency_key_reused');
    expectError(
      await create(t.apiKey, { name: 'idem' }, { 'idempotency-key': 'x'.repeat(300) }),
      400,
      'invalid_idempotency_key',
    );
  });
});
