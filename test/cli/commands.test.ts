/**
 * `postyard --version`, `tenants list`, `keys list|revoke`, `users list|delete` and the log format
 * of `start`, as real child processes against the test's own database (both backends).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, keyWithScopes, type TestContext } from '../helpers/context.ts';
import { killChildren, REPO_ROOT, runCli, SPAWN_TEST_TIMEOUT_MS, startServer } from '../helpers/server-process.ts';
import { cliEnvFor } from './cli-env.ts';

let ctx: TestContext;
let env: Record<string, string>;
let tenantId: string;

beforeAll(async () => {
  ctx = await createTestContext();
  tenantId = (await createTenant(ctx)).tenantId;
  env = cliEnvFor(ctx);
});
afterAll(async () => {
  killChildren();
  await ctx?.close();
});

const jsonLines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('postyard commands', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('--version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(`${REPO_ROOT}/package.json`, 'utf8')) as { version: string };
    const r = await runCli(['--version'], { env });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${pkg.version}\n`);
  });

  it('tenants list shows every tenant', async () => {
    const other = (await createTenant(ctx)).tenantId;
    const r = await runCli(['tenants', 'list', '--json'], { env });
    expect(r.code, r.stderr).toBe(0);
    const ids = jsonLines(r.stdout).map((t) => t.id);
    expect(ids).toEqual(expect.arrayContaining([tenantId, other]));
    const text = await runCli(['tenants', 'list'], { env });
    expect(text.stdout).toMatch(/^ID\s+NAME\s+DEFAULT FROM\s+CREATED$/m);
    expect(text.stdout).toContain(other);
  });

  it('keys list shows prefixes, never keys; keys revoke stops the key', async () => {
    const key = await keyWithScopes(ctx, tenantId, ['manage:suppressions']);
    const listed = jsonLines((await runCli(['keys', 'list', '--tenant', tenantId, '--json'], { env })).stdout);
    const entry = listed.find((k) => key.startsWith(String(k.prefix)));
    expect(entry?.scopes).toEqual(['manage:suppressions']);
    expect(JSON.stringify(listed)).not.toContain(key);

    const before = await ctx.app.inject({ url: '/v1/suppressions', headers: { authorization: `Bearer ${key}` } });
    expect(before.statusCode).toBe(200);
    const revoked = await runCli(['keys', 'revoke', '--tenant', tenantId, '--id', String(entry?.id)], { env });
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toBe(`revoked: ${entry?.id}\n`);
    // The in-process app caches keys for at most POSTYARD_AUTH_CACHE_SECONDS; ask the database.
    const row = await ctx.c.database.db
      .selectFrom('api_keys')
      .select('deleted_at')
      .where('id', '=', String(entry?.id))
      .executeTakeFirstOrThrow();
    expect(row.deleted_at).not.toBeNull();

    const after = jsonLines((await runCli(['keys', 'list', '--tenant', tenantId, '--json'], { env })).stdout);
    expect(after.map((k) => k.id)).not.toContain(entry?.id);
    const withRevoked = jsonLines(
      (await runCli(['keys', 'list', '--tenant', tenantId, '--revoked', '--json'], { env })).stdout,
    );
    expect(withRevoked.find((k) => k.id === entry?.id)?.revoked_at).toBe(row.deleted_at);

    const again = await runCli(['keys', 'revoke', '--tenant', tenantId, '--id', String(entry?.id)], { env });
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/not found/i);
  });

  it('users list and users delete (sessions end with the user)', async () => {
    await ctx.c.dashboard.createUser(tenantId, { email: 'gone@acme.test', password: 'a good password' });
    await ctx.c.dashboard.createUser(tenantId, { email: 'stays@acme.test' });
    const listed = jsonLines((await runCli(['users', 'list', '--tenant', tenantId, '--json'], { env })).stdout);
    expect(listed.map((u) => [u.email, u.has_password])).toEqual([
      ['gone@acme.test', true],
      ['stays@acme.test', false],
    ]);
    expect(await ctx.c.dashboard.loginWithPassword('gone@acme.test', 'a good password')).not.toBeNull();
    const sessionsOf = () =>
      ctx.c.database.db.selectFrom('dashboard_sessions').select('id').where('tenant_id', '=', tenantId).execute();
    expect(await sessionsOf()).toHaveLength(1);

    const r = await runCli(['users', 'delete', '--email', 'Gone@Acme.test'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('deleted: gone@acme.test\n');
    expect(await sessionsOf()).toHaveLength(0);
    const left = jsonLines((await runCli(['users', 'list', '--json'], { env })).stdout);
    expect(left.map((u) => u.email)).toEqual(['stays@acme.test']);
    const again = await runCli(['users', 'delete', '--email', 'gone@acme.test'], { env });
    expect(again.code).toBe(2);
  });

  it('start logs JSON when stdout is not a terminal, readable lines with POSTYARD_LOG_FORMAT=pretty', async () => {
    const json = await startServer(['--roles', 'api'], { env: { ...env, POSTYARD_LOG_LEVEL: 'info' } });
    await json.stop();
    const first = json.stdout().split('\n')[0] ?? '';
    expect(JSON.parse(first)).toMatchObject({ msg: 'starting postyard', service: 'postyard' });

    const pretty = await startServer(['--roles', 'api'], {
      env: { ...env, POSTYARD_LOG_LEVEL: 'info', POSTYARD_LOG_FORMAT: 'pretty' },
    });
    await pretty.stop();
    expect(pretty.stdout()).toMatch(/^\[[0-9-]+ [0-9:.]+ [+-]\d{4}\] INFO: starting postyard$/m);
    expect(() => JSON.parse(pretty.stdout().split('\n')[0] ?? '')).toThrow();
  });
});
