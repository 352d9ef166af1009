/**
 * Faults answered with the right status (issue 31 item 7): a request that fails because the
 * database is unreachable answers `503 unavailable` with Retry-After, one that fails because it
 * is full `507 insufficient_storage`; SMTP submission answers them 451 4.3.0 and 452 4.3.1
 * (temporary, the client keeps the message); both are counted in postyard_database_faults_total.
 * Before, the API answered `500 internal_error`, which clients and balancers report as a bug.
 *
 * PostgreSQL: the node reaches the database through a TCP proxy on loopback that the test cuts
 * (every connection reset, new ones refused), then restores. SQLite: `PRAGMA max_page_count` at
 * the database's current size makes every write that needs a new page fail with SQLITE_FULL, as
 * a full disk does (a 256 KiB tmpfs gave the same SQLITE_FULL).
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORAGE_FULL_RETRY_AFTER_S, UNAVAILABLE_RETRY_AFTER_S } from '../../src/http/error-handler.ts';
import { type RunningSmtpServer, startSmtpServer } from '../../src/smtp/server.ts';
import {
  call,
  createTenant,
  createTestContext,
  DIALECT,
  TEST_DATABASE_URL,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { type Credential, newCredential, RawClient } from '../smtp/helpers.ts';

let ctx: TestContext;
let tenant: TestTenant;
let smtp: RunningSmtpServer;
let cred: Credential;
let proxy: TcpProxy | undefined;

beforeAll(async () => {
  let env: Record<string, string> = {};
  if (TEST_DATABASE_URL) {
    const target = new URL(TEST_DATABASE_URL);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const through = new URL(TEST_DATABASE_URL);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    env = { DATABASE_URL: through.toString() };
  }
  ctx = await createTestContext({ env });
  tenant = await createTenant(ctx, 'Shop <shop@example.com>');
  cred = await newCredential(ctx, tenant.tenantId);
  smtp = await startSmtpServer(ctx.c, { port: 0, host: '127.0.0.1' });
});

afterAll(async () => {
  await proxy?.restore().catch(() => {});
  await smtp?.close();
  await ctx?.close();
  await proxy?.close();
});

function send(recipients = 1) {
  return call(ctx.app, 'POST', '/v1/transmissions', {
    key: tenant.apiKey,
    body: {
      recipients: Array.from({ length: recipients }, (_, i) => ({ email: `r${i}@example.com` })),
      content: { subject: 'Hello', text: 'x'.repeat(2000) },
    },
  });
}

/** MAIL, RCPT, DATA and a message on an authenticated session: the first reply that is not 2xx/3xx. */
async function submit(client: RawClient): Promise<string> {
  for (const line of ['MAIL FROM:<shop@example.com>', 'RCPT TO:<ann@example.com>', 'DATA']) {
    const r = await client.cmd(line);
    if (!/^[23]/.test(r)) return r;
  }
  return client.cmd('From: shop@example.com\r\nTo: ann@example.com\r\nSubject: Hi\r\n\r\nHello\r\n.');
}

async function faults(kind: string, via: string): Promise<number> {
  const metric = await ctx.c.metrics.getSingleMetric('postyard_database_faults_total')?.get();
  return metric?.values.find((v) => v.labels.kind === kind && v.labels.via === via)?.value ?? 0;
}

describe.runIf(DIALECT === 'postgres')('the database unreachable (PostgreSQL connections cut)', () => {
  it('answers 503 unavailable with Retry-After, SMTP 451 4.3.0, counts both, and recovers', async () => {
    expect((await send()).statusCode).toBe(202);
    const client = await RawClient.ready(smtp.port, cred);
    await proxy?.cut();

    for (const res of [
      await send(),
      await call(ctx.app, 'GET', '/v1/suppressions', { key: tenant.apiKey }),
      await call(ctx.app, 'GET', '/v1/events', { key: tenant.apiKey }),
    ]) {
      expect(res.statusCode, res.body).toBe(503);
      expect(res.headers['retry-after']).toBe(String(UNAVAILABLE_RETRY_AFTER_S));
      expect(res.json()).toEqual({ errors: [{ code: 'unavailable', message: 'The database is unreachable; retry' }] });
    }
    expect(await submit(client)).toMatch(/^451 4\.3\.0 /);
    expect(await faults('unavailable', 'http')).toBeGreaterThanOrEqual(3);
    expect(await faults('unavailable', 'smtp')).toBeGreaterThanOrEqual(1);
    expect(await faults('storage_full', 'http')).toBe(0);

    // Back: the pool opens new connections and the same request is accepted.
    await proxy?.restore();
    let res = await send();
    for (let i = 0; i < 20 && res.statusCode !== 202; i++) {
      await new Promise((r) => setTimeout(r, 250));
      res = await send();
    }
    expect(res.statusCode, res.body).toBe(202);
    await client.cmd('QUIT').catch(() => '');
  }, 60_000);
});

describe.runIf(DIALECT === 'sqlite')('the database full (SQLite)', () => {
  it('answers 507 insufficient_storage with Retry-After, SMTP 452 4.3.1, counts both, and recovers', async () => {
    expect((await send()).statusCode).toBe(202);
    const client = await RawClient.ready(smtp.port, cred);
    const db = ctx.c.database.db;
    const pages = Number((await sql<{ page_count: number }>`pragma page_count`.execute(db)).rows[0]?.page_count);
    await sql.raw(`pragma max_page_count = ${pages}`).execute(db);
    try {
      const res = await send(500);
      expect(res.statusCode, res.body).toBe(507);
      expect(res.headers['retry-after']).toBe(String(STORAGE_FULL_RETRY_AFTER_S));
      expect(res.json()).toEqual({
        errors: [{ code: 'insufficient_storage', message: 'The server is out of storage; retry later' }],
      });
      // Nothing of the refused transmission was kept.
      const kept = await db
        .selectFrom('messages')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      expect(Number(kept.n)).toBe(1);
      // Enough submissions to need a page (each adds rows to several tables and their indexes).
      let reply = '';
      for (let i = 0; i < 20 && !reply.startsWith('452'); i++) reply = await submit(client);
      expect(reply).toMatch(/^452 4\.3\.1 /);
      expect(await faults('storage_full', 'http')).toBeGreaterThanOrEqual(1);
      expect(await faults('storage_full', 'smtp')).toBeGreaterThanOrEqual(1);
      expect(await faults('unavailable', 'http')).toBe(0);
    } finally {
      await sql.raw('pragma max_page_count = 4294967294').execute(db);
    }
    expect((await send(500)).statusCode).toBe(202);
    await client.cmd('QUIT').catch(() => '');
  }, 60_000);
});
