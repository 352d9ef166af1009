/**
 * `postyard users create` and `postyard users link` as real child processes, against the test's
 * own database (SQLite file or PostgreSQL schema), then used to sign in to the dashboard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant, createTestContext, TEST_DATABASE_URL, type TestContext } from '../helpers/context.ts';
import { killChildren, runCli, SPAWN_TEST_TIMEOUT_MS } from '../helpers/server-process.ts';
import { DashClient } from './helpers.ts';

let ctx: TestContext;
let env: Record<string, string>;
let tenantId: string;

beforeAll(async () => {
  ctx = await createTestContext();
  tenantId = (await createTenant(ctx)).tenantId;
  env = { POSTYARD_DATA_DIR: ctx.dataDir, POSTYARD_HTTP_PORT: '3999' };
  if (TEST_DATABASE_URL && ctx.pgSchema) {
    const url = new URL(TEST_DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${ctx.pgSchema}`);
    env.DATABASE_URL = url.toString();
  }
});
afterAll(async () => {
  killChildren();
  await ctx?.close();
});

function tokenOf(link: string): string {
  const m = /^http:\/\/127\.0\.0\.1:3999\/login#token=([0-9A-Za-z]+)$/.exec(link);
  if (!m?.[1]) throw new Error(`unexpected link ${link}`);
  return m[1];
}

// Each test spawns the CLI: minutes under load, not vitest's default 30 s (SPAWN_TIMEOUT_MS).
describe('postyard users', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('creates a user with a password read from stdin (--password-stdin) who can then sign in', async () => {
    const r = await runCli(
      ['users', 'create', '--tenant', tenantId, '--email', 'Ops@Acme.test', '--password-stdin', '--json'],
      { env, input: 'a good password\n' },
    );
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { user_id: string; email: string };
    expect(out.email).toBe('ops@acme.test');
    expect(r.stdout + r.stderr).not.toContain('a good password');
    expect((await new DashClient(ctx.app).login('ops@acme.test', 'a good password')).statusCode).toBe(200);
  });

  it('refuses a password in the arguments (--password VALUE, shown by ps) with exit 2; no user is created', async () => {
    const r = await runCli(
      ['users', 'create', '--tenant', tenantId, '--email', 'argv@acme.test', '--password', 'a visible password'],
      { env },
    );
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--password: .*process list.*--password-stdin/);
    expect(r.stderr + r.stdout).not.toContain('a visible password');
    const user = await ctx.c.database.db
      .selectFrom('dashboard_users')
      .select('id')
      .where('email', '=', 'argv@acme.test')
      .executeTakeFirst();
    expect(user).toBeUndefined();
  });

  it('prints a one-time sign-in link when no password is given', async () => {
    const r = await runCli(['users', 'create', '--tenant', tenantId, '--email', 'new@acme.test'], { env });
    expect(r.code, r.stderr).toBe(0);
    const link = /sign in: (\S+)/.exec(r.stdout)?.[1] ?? '';
    const client = new DashClient(ctx.app);
    await client.session();
    const res = await client.post('/dashboard/api/login/link', { token: tokenOf(link) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().user).toMatchObject({ email: 'new@acme.test', has_password: false });
    // `users link` issues a fresh one (e.g. after a forgotten password).
    const again = await runCli(
      ['users', 'link', '--email', 'new@acme.test', '--json', '--base-url', 'https://mail.acme.test/'],
      { env },
    );
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).login_url).toMatch(/^https:\/\/mail\.acme\.test\/login#token=[0-9A-Za-z]{43}$/);
  });

  it('documents its options in --help', async () => {
    const r = await runCli(['users', 'create', '--help'], { env });
    expect(r.code).toBe(0);
    for (const opt of ['--tenant', '--email', '--password-stdin', '--base-url', '--json'])
      expect(r.stdout).toContain(opt);
    expect(r.stdout).not.toMatch(/--password </);
  });

  it.each([
    ['missing --email', ['users', 'create', '--tenant', 'x'], /--email/],
    ['missing --tenant', ['users', 'create', '--email', 'a@acme.test'], /--tenant/],
    ['bad email', ['users', 'create', '--tenant', 'TENANT', '--email', 'not-an-email'], /email/],
    [
      'short password',
      ['users', 'create', '--tenant', 'TENANT', '--email', 'p@acme.test', '--password-stdin'],
      /password/,
      'short\n',
    ],
    [
      'no password on stdin',
      ['users', 'create', '--tenant', 'TENANT', '--email', 'p@acme.test', '--password-stdin'],
      /--password-stdin: no password on stdin/,
      '',
    ],
    [
      'more than one line on stdin',
      ['users', 'create', '--tenant', 'TENANT', '--email', 'p@acme.test', '--password-stdin'],
      /one line/,
      'first line\nsecond line\n',
    ],
    [
      'unknown tenant',
      ['users', 'create', '--tenant', '00000000-0000-7000-8000-000000000000', '--email', 'z@acme.test'],
      /Tenant/,
    ],
    [
      'taken email',
      ['users', 'create', '--tenant', 'TENANT', '--email', 'OPS@acme.test', '--password-stdin'],
      /already exists/,
      'another password\n',
    ],
    ['unknown user', ['users', 'link', '--email', 'ghost@acme.test'], /not found/],
  ] as [string, string[], RegExp, string?][])(
    'exits 2 on %s with one line on stderr',
    async (_name, args, mentions, input) => {
      const r = await runCli(
        args.map((a) => (a === 'TENANT' ? tenantId : a)),
        { env, ...(input !== undefined ? { input } : {}) },
      );
      expect(r.code, r.stderr).toBe(2);
      const lines = r.stderr.split('\n').filter((l) => l.trim());
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(mentions);
    },
  );
});
