import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { type Container, createContainer } from '../../src/container.ts';
import { type App, buildApp } from '../../src/app.ts';
import { createLogger } from '../../src/logger.ts';
import { SCOPES } from '../../src/modules/api-keys/scopes.ts';

/**
 * Every test file gets its own database: a temp SQLite file, or, when TEST_DATABASE_URL is set,
 * its own PostgreSQL schema (dropped at the end). Nothing is mocked.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || null;
export const DIALECT = TEST_DATABASE_URL ? 'postgres' : 'sqlite';

export interface TestContext {
  c: Container;
  app: App;
  env: Record<string, string>;
  dataDir: string;
  pgSchema: string | null;
  close(): Promise<void>;
}

export interface TestContextOptions {
  env?: Record<string, string>;
  /** Reuse another context's database (a second "node"). */
  shareWith?: TestContext;
  /**
   * Only `env` (plus the data dir, silent logs and the test database), without the suite's
   * defaults (development mode, private webhook targets, rate and auth-failure limits off): for
   * tests that must run exactly the configuration a page of the docs tells the reader to use.
   */
  exactEnv?: boolean;
}

async function createPgSchema(): Promise<string> {
  const schema = `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
  await client.connect();
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.end();
  return schema;
}

async function dropPgSchema(schema: string) {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL ?? undefined });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await client.end();
}

/**
 * One teardown step, bounded. A step still running after 15 s is reported on stderr with its
 * name (CI once saw an afterAll hang here on PostgreSQL under load and could not say where);
 * after 40 s teardown gives up on it and goes on, so the hook ends inside vitest's 60 s and the
 * report, not a hook timeout, says what hung. The tests' own assertions are not affected.
 */
async function teardownStep(name: string, fn: () => Promise<unknown>): Promise<void> {
  const started = Date.now();
  const warn = setTimeout(() => console.error(`[teardown] ${name} still running after 15 s`), 15_000);
  let giveUp: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'gave up'>((r) => {
    giveUp = setTimeout(() => r('gave up'), 40_000);
  });
  try {
    const outcome = await Promise.race([fn().then(() => 'done' as const), gaveUp]);
    if (outcome === 'gave up') console.error(`[teardown] ${name} did not finish in 40 s; going on without it`);
    else if (Date.now() - started > 15_000) console.error(`[teardown] ${name} took ${Date.now() - started} ms`);
  } finally {
    clearTimeout(warn);
    clearTimeout(giveUp);
  }
}

export async function createTestContext(opts: TestContextOptions = {}): Promise<TestContext> {
  const owner = !opts.shareWith;
  const dataDir = opts.shareWith?.dataDir ?? mkdtempSync(join(tmpdir(), 'postyard-test-'));
  const pgSchema = opts.shareWith ? opts.shareWith.pgSchema : TEST_DATABASE_URL ? await createPgSchema() : null;
  const env: Record<string, string> = opts.exactEnv
    ? {
        POSTYARD_DATA_DIR: dataDir,
        POSTYARD_LOG_LEVEL: 'silent',
        ...(TEST_DATABASE_URL ? { DATABASE_URL: TEST_DATABASE_URL } : {}),
        ...(opts.env ?? {}),
      }
    : {
        POSTYARD_DATA_DIR: dataDir,
        POSTYARD_LOG_LEVEL: 'silent',
        POSTYARD_DEV_MODE: 'true',
        POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS: 'true',
        POSTYARD_RATE_LIMIT_RPS: '0',
        // Suites send many bad keys from one address; test/security/brute-force.test.ts turns it on.
        POSTYARD_AUTH_FAILURES_PER_IP: '0',
        POSTYARD_SHUTDOWN_GRACE_SECONDS: '2',
        ...(TEST_DATABASE_URL ? { DATABASE_URL: TEST_DATABASE_URL } : {}),
        ...(opts.shareWith?.env ?? {}),
        ...(opts.env ?? {}),
      };
  const config = loadConfig(env);
  const c = await createContainer(config, createLogger(config.logLevel), pgSchema ? { pgSchema } : {});
  const app = await buildApp(c);
  await app.ready();
  return {
    c,
    app,
    env,
    dataDir,
    pgSchema,
    async close() {
      await teardownStep('app.close', () => app.close());
      await teardownStep('container.close', () => c.close());
      if (owner) {
        if (pgSchema) await teardownStep('drop schema', () => dropPgSchema(pgSchema));
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

export interface TestTenant {
  tenantId: string;
  apiKey: string;
}

export async function createTenant(ctx: TestContext, from = 'Test <sender@example.com>'): Promise<TestTenant> {
  const t = await ctx.c.tenants.create({ name: 'Test tenant', from });
  return { tenantId: t.tenant_id, apiKey: t.api_key };
}

/** A key of `tenant` holding only `scopes`. */
export async function keyWithScopes(ctx: TestContext, tenantId: string, scopes: string[]): Promise<string> {
  const k = await ctx.c.apiKeys.create(tenantId, { name: 'scoped', scopes }, 'all');
  return k.key;
}

export const ALL_SCOPES = [...SCOPES];

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
  query?: Record<string, string>;
}

/** Shorthand for app.inject with JSON and a bearer key. */
export async function call(
  app: App,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
  url: string,
  opts: CallOptions = {},
): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let payload: string | undefined;
  if (opts.body !== undefined) {
    payload = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  return app.inject({
    method,
    url,
    headers,
    ...(payload !== undefined ? { payload } : {}),
    ...(opts.query ? { query: opts.query } : {}),
  });
}
