/**
 * The `postyard` command as a real child process (README.md "Command line", docs/operations.md): --help, exit codes,
 * configuration errors, tenants/keys creation, `start` over a real socket, SIGTERM.
 * Runs on a temp SQLite data dir; with TEST_DATABASE_URL also against PostgreSQL (own schema).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL } from '../helpers/context.ts';
import { inPool } from '../helpers/cluster.ts';
import {
  type CliResult,
  killChildren,
  runCli,
  SPAWN_TEST_TIMEOUT_MS,
  SPAWN_TIMEOUT_MS,
  type ServerProcess,
  startServer,
} from '../helpers/server-process.ts';

const KEY_FORMAT = /^pyk_[0-9A-Za-z]{44,}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const dataDir = mkdtempSync(join(tmpdir(), 'postyard-cli-'));
// Every test here spawns `postyard` processes: minutes, not vitest's 30 s (see SPAWN_TIMEOUT_MS).
const slow = { timeout: SPAWN_TEST_TIMEOUT_MS };
const env = { POSTYARD_DATA_DIR: dataDir };

afterAll(() => {
  killChildren();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Exactly one non-empty line on stderr. */
function expectOneLine(r: CliResult, what: string) {
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  expect(lines, `${what}: stderr was ${JSON.stringify(r.stderr)}`).toHaveLength(1);
  expect(r.stderr.endsWith('\n')).toBe(true);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  return lines[0] as string;
}

function parseJsonLine(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  expect(lines, stdout).toHaveLength(1);
  return JSON.parse(lines[0] as string) as Record<string, unknown>;
}

describe('--help', slow, () => {
  const commands = [[], ['start'], ['migrate'], ['tenants'], ['tenants', 'create'], ['keys'], ['keys', 'create']];

  it('exits 0 with usage on every command', async () => {
    // Two at a time: all seven at once took more than 30 s on a loaded 2-core machine (issue 13).
    const results = await inPool(commands, 2, (cmd) => runCli([...cmd, '--help'], { env }));
    results.forEach((r, i) => {
      const what = `postyard ${commands[i]?.join(' ')} --help`;
      expect(r.code, `${what}: ${r.stderr}`).toBe(0);
      expect(r.stdout, what).toMatch(/^Usage: postyard/m);
      expect(r.stderr, what).toBe('');
    });
    // The command-specific options are described.
    expect(results[1]?.stdout).toContain('--roles');
    expect(results[4]?.stdout).toContain('--name');
    expect(results[4]?.stdout).toContain('--from');
    expect(results[4]?.stdout).toContain('--json');
    expect(results[6]?.stdout).toContain('--scopes');
    expect(results[6]?.stdout).toContain('--tenant');
  });
});

describe('wrong arguments: exit 2 with one line on stderr', slow, () => {
  const cases: [string, string[], RegExp][] = [
    ['unknown command', ['frobnicate'], /frobnicate/],
    ['unknown subcommand', ['tenants', 'frobnicate'], /frobnicate/],
    ['unknown option', ['tenants', 'create', '--name', 'A', '--colour', 'red'], /--colour/],
    ['missing --name', ['tenants', 'create', '--from', 'A <a@acme.test>'], /--name/],
    ['missing --scopes', ['keys', 'create', '--tenant', 'x', '--name', 'ci'], /--scopes/],
    ['bad --roles', ['start', '--roles', 'api,bogus'], /bogus/],
    ['empty --roles', ['start', '--roles', ','], /role/],
    [
      'bad --scopes',
      ['keys', 'create', '--tenant', 'x', '--name', 'ci', '--scopes', 'read:everything'],
      /read:everything/,
    ],
  ];

  it.each(cases)('%s', async (_name, args, mentions) => {
    const r = await runCli(args, { env });
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
    expect(expectOneLine(r, args.join(' '))).toMatch(mentions);
    expect(r.stdout).toBe('');
  });
});

describe('bad configuration: exit 1 with one line naming the variable', slow, () => {
  const cases: [string, string[], Record<string, string>][] = [
    ['POSTYARD_HTTP_PORT', ['start', '--roles', 'api'], { POSTYARD_HTTP_PORT: 'abc' }],
    ['POSTYARD_HTTP_PORT', ['tenants', 'create', '--name', 'Acme'], { POSTYARD_HTTP_PORT: 'abc' }],
    ['DATABASE_URL', ['migrate'], { DATABASE_URL: 'mysql://root@127.0.0.1/postyard' }],
    ['POSTYARD_DNS_SERVERS', ['start'], { POSTYARD_DNS_SERVERS: 'garbage' }],
    ['POSTYARD_MASTER_KEY', ['start'], { POSTYARD_MASTER_KEY: 'short' }],
  ];

  it.each(cases)('%s (%j)', async (variable, args, bad) => {
    const r = await runCli(args, { env: { ...env, ...bad } });
    expect(r.code, r.stderr).toBe(1);
    expect(expectOneLine(r, args.join(' '))).toContain(variable);
  });
});

describe('tenants, keys and the server (SQLite)', slow, () => {
  let tenant: { tenant_id: string; api_key: string };
  let eventsKey: { id: string; key: string; scopes: string[] };

  beforeAll(async () => {
    const m = await runCli(['migrate'], { env });
    expect(m.code, m.stderr).toBe(0);
  }, SPAWN_TIMEOUT_MS);

  it('migrate is idempotent', async () => {
    const r = await runCli(['migrate'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/up to date/);
  });

  it('tenants create --json prints {"tenant_id","api_key"} once', async () => {
    const r = await runCli(['tenants', 'create', '--name', 'Acme', '--from', 'Acme <noreply@acme.test>', '--json'], {
      env,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const out = parseJsonLine(r.stdout);
    expect(Object.keys(out).sort()).toEqual(['api_key', 'tenant_id']);
    expect(out.tenant_id).toMatch(UUID);
    expect(out.api_key).toMatch(KEY_FORMAT);
    tenant = out as typeof tenant;
  });

  it('tenants create rejects a bad --from with exit 2 and one line', async () => {
    const r = await runCli(['tenants', 'create', '--name', 'Bad', '--from', 'not an address'], { env });
    expect(r.code).toBe(2);
    expect(expectOneLine(r, 'bad --from')).toMatch(/from/);
  });

  it('keys create --json makes a key with the given scopes', async () => {
    const r = await runCli(
      ['keys', 'create', '--tenant', tenant.tenant_id, '--name', 'ci', '--scopes', 'read:events', '--json'],
      { env },
    );
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonLine(r.stdout);
    expect(out.key).toMatch(KEY_FORMAT);
    expect(out.id).toMatch(UUID);
    expect(out.scopes).toEqual(['read:events']);
    eventsKey = out as typeof eventsKey;
  });

  it('keys create for an unknown tenant fails with one line', async () => {
    const r = await runCli(
      ['keys', 'create', '--tenant', '00000000-0000-7000-8000-000000000000', '--name', 'ci', '--scopes', 'all'],
      { env },
    );
    expect(r.code).not.toBe(0);
    expect(expectOneLine(r, 'unknown tenant')).toMatch(/[Tt]enant/);
  });

  describe('start --roles api', () => {
    let server: ServerProcess;
    beforeAll(async () => {
      server = await startServer(['--roles', 'api'], { env });
    }, SPAWN_TIMEOUT_MS + 10_000);
    afterAll(async () => {
      await server?.stop('SIGKILL');
    });

    it('answers /healthz and /readyz over a real socket', async () => {
      const health = await fetch(`${server.baseUrl}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(health.headers.get('x-request-id')).toMatch(UUID);
      expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(200);
    });

    it('serves GET /v1/api-keys to the CLI-made keys (200 with all scopes, 403 without the scope)', async () => {
      const res = await fetch(`${server.baseUrl}/v1/api-keys`, {
        headers: { authorization: `Bearer ${tenant.api_key}`, 'x-request-id': 'cli-test-1' },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('cli-test-1');
      expect(res.headers.get('ratelimit-limit')).toBe('200');
      const body = (await res.json()) as { data: { id: string }[] };
      expect(body.data.map((k) => k.id)).toContain(eventsKey.id);
      expect(body.data).toHaveLength(2);

      const denied = await fetch(`${server.baseUrl}/v1/api-keys`, {
        headers: { authorization: `Bearer ${eventsKey.key}` },
      });
      expect(denied.status).toBe(403);
      expect(((await denied.json()) as { errors: { code: string }[] }).errors[0]?.code).toBe('insufficient_scope');
      expect((await fetch(`${server.baseUrl}/v1/api-keys`)).status).toBe(401);
    });

    it('creates over HTTP what the CLI then sees (one database)', async () => {
      const res = await fetch(`${server.baseUrl}/v1/smtp-credentials`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'over the socket' }),
      });
      expect(res.status).toBe(201);
      const big = await fetch(`${server.baseUrl}/v1/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.api_key}`, 'content-type': 'text/plain' },
        body: 'hello',
      });
      expect(big.status).toBe(415);
    });

    it('logs JSON lines with the request id and never the key', async () => {
      await new Promise((r) => setTimeout(r, 200));
      const logs = server.stdout();
      expect(logs).toContain('"reqId":"cli-test-1"');
      expect(logs).not.toContain(tenant.api_key);
      expect(logs).not.toContain(eventsKey.key);
      for (const line of logs.trim().split('\n')) expect(() => JSON.parse(line), line).not.toThrow();
    });

    it('SIGTERM: exits 0 within 10 s and stops listening', async () => {
      const { code, signal, ms } = await server.stop('SIGTERM', 15_000);
      expect(signal).toBeNull();
      expect(code).toBe(0);
      expect(ms).toBeLessThan(10_000);
      await expect(fetch(`${server.baseUrl}/healthz`)).rejects.toThrow();
    });
  });

  it('start with every role (the npm start default) answers and stops cleanly on SIGTERM', async () => {
    const server = await startServer([], { env });
    try {
      const res = await fetch(`${server.baseUrl}/v1/api-keys`, {
        headers: { authorization: `Bearer ${tenant.api_key}` },
      });
      expect(res.status).toBe(200);
    } finally {
      const { code, ms } = await server.stop('SIGTERM');
      expect(code).toBe(0);
      expect(ms).toBeLessThan(10_000);
    }
  });

  it('a port already in use is a clean failure (exit 1, no stack trace)', async () => {
    const first = await startServer(['--roles', 'api'], { env });
    try {
      const r = await runCli(['start', '--roles', 'api'], {
        env: { ...env, POSTYARD_HTTP_PORT: String(first.port), POSTYARD_HTTP_HOST: '127.0.0.1' },
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/EADDRINUSE|in use/i);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await first.stop('SIGTERM');
    }
  });
});

describe.runIf(TEST_DATABASE_URL)('against PostgreSQL (DATABASE_URL)', slow, () => {
  const schema = `cli_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  let pgEnv: Record<string, string>;
  let pgDataDir: string;

  beforeAll(async () => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
    await client.connect();
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.end();
    const url = new URL(TEST_DATABASE_URL as string);
    url.searchParams.set('options', `-c search_path=${schema}`);
    pgDataDir = mkdtempSync(join(tmpdir(), 'postyard-cli-pg-'));
    pgEnv = { POSTYARD_DATA_DIR: pgDataDir, DATABASE_URL: url.toString() };
  });
  afterAll(async () => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
    if (pgDataDir) rmSync(pgDataDir, { recursive: true, force: true });
  });

  it('migrate creates the schema once, then is up to date', async () => {
    const first = await runCli(['migrate'], { env: pgEnv });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/applied: /);
    const second = await runCli(['migrate'], { env: pgEnv });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/up to date/);
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
    await client.connect();
    const { rows } = await client.query<{ table_name: string }>(
      'select table_name from information_schema.tables where table_schema = $1',
      [schema],
    );
    await client.end();
    const tables = rows.map((r) => r.table_name);
    expect(tables).toEqual(expect.arrayContaining(['tenants', 'api_keys', 'smtp_credentials', 'idempotency_keys']));
    // No SQLite file was made: the data lives in PostgreSQL.
    expect(() => rmSync(join(pgDataDir, 'postyard.sqlite'))).toThrow();
  });

  it('tenants create and start --roles api work on PostgreSQL', async () => {
    const r = await runCli(['tenants', 'create', '--name', 'PgCo', '--json'], { env: pgEnv });
    expect(r.code, r.stderr).toBe(0);
    const t = parseJsonLine(r.stdout) as { api_key: string };
    const server = await startServer(['--roles', 'api'], { env: pgEnv });
    try {
      const res = await fetch(`${server.baseUrl}/v1/api-keys`, { headers: { authorization: `Bearer ${t.api_key}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { data: unknown[] }).data).toHaveLength(1);
      expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(200);
    } finally {
      const { code } = await server.stop('SIGTERM');
      expect(code).toBe(0);
    }
  });
});
