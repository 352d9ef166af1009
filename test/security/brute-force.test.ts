/**
 * Brute force on credentials (docs/security.md, "Brute force"): failed API keys and failed SMTP
 * AUTHs are budgeted per client address (POSTYARD_AUTH_FAILURES_PER_IP, shared across nodes);
 * the dashboard's sign-in limits also cover one-time links and password changes. Password
 * sign-in limits themselves are proven in test/dashboard/auth.test.ts ("sign-in rate limits"),
 * and the per-connection SMTP cap in test/smtp/auth.test.ts.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.ts';
import { type RunningSmtpServer, startSmtpServer } from '../../src/smtp/server.ts';
import { DashClient, freshIp, PASSWORD, signedInUser } from '../dashboard/helpers.ts';
import { createTenant, createTestContext, DIALECT, type TestContext, type TestTenant } from '../helpers/context.ts';
import { RawClient } from '../smtp/helpers.ts';

const LIMIT = 5;

function get(ctx: TestContext, ip: string, authorization?: string): Promise<LightMyRequestResponse> {
  return ctx.app.inject({
    method: 'GET',
    url: '/v1/events',
    remoteAddress: ip,
    headers: authorization === undefined ? {} : { authorization },
  });
}
const wrongKey = () => `Bearer pyk_${randomBase62(44)}`;

describe('API keys: failed attempts per client address', () => {
  let a: TestContext;
  let b: TestContext;
  let tenant: TestTenant;

  beforeAll(async () => {
    const env = { POSTYARD_AUTH_FAILURES_PER_IP: String(LIMIT), POSTYARD_AUTH_CACHE_SECONDS: '0' };
    a = await createTestContext({ env });
    b = await createTestContext({ shareWith: a, env });
    tenant = await createTenant(a);
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('401 for the budget of wrong keys, then 429 rate_limited with Retry-After; valid keys keep working', async () => {
    const ip = '203.0.113.10';
    for (let i = 0; i < LIMIT; i++) expect((await get(a, ip, wrongKey())).statusCode, `attempt ${i + 1}`).toBe(401);
    for (let i = 0; i < 3; i++) {
      const res = await get(a, ip, wrongKey());
      expect(res.statusCode).toBe(429);
      expect((res.json() as { errors: { code: string }[] }).errors[0]?.code).toBe('rate_limited');
      // Blocked until one failure's worth has refilled: 10 minutes / LIMIT.
      const retry = Number(res.headers['retry-after']);
      expect(retry).toBeGreaterThan(60);
      expect(retry).toBeLessThanOrEqual(600 / LIMIT);
    }
    // The same malformed guesses count too (any presented credential that fails).
    expect((await get(a, ip, 'Bearer not-a-key')).statusCode).toBe(429);
    // A valid key from the blocked address still works: a guesser cannot lock out its neighbours.
    expect((await get(a, ip, `Bearer ${tenant.apiKey}`)).statusCode).toBe(200);
    // Other addresses are unaffected.
    expect((await get(a, '203.0.113.11', wrongKey())).statusCode).toBe(401);
  });

  it('requests without credentials are not counted (there is nothing to guess)', async () => {
    const ip = '203.0.113.20';
    for (let i = 0; i < LIMIT * 3; i++) expect((await get(a, ip)).statusCode).toBe(401);
    expect((await get(a, ip, wrongKey())).statusCode).toBe(401);
  });

  it('successful requests never take from the budget', async () => {
    const ip = '203.0.113.30';
    for (let i = 0; i < LIMIT * 3; i++) expect((await get(a, ip, `Bearer ${tenant.apiKey}`)).statusCode).toBe(200);
    for (let i = 0; i < LIMIT; i++) expect((await get(a, ip, wrongKey())).statusCode).toBe(401);
    expect((await get(a, ip, wrongKey())).statusCode).toBe(429);
  });

  it.skipIf(DIALECT !== 'postgres')('PostgreSQL: the budget is shared by the nodes of one database', async () => {
    const ip = '203.0.113.40';
    for (let i = 0; i < LIMIT; i++) {
      const node = i % 2 === 0 ? a : b;
      expect((await get(node, ip, wrongKey())).statusCode).toBe(401);
    }
    expect((await get(b, ip, wrongKey())).statusCode).toBe(429);
    expect((await get(a, ip, wrongKey())).statusCode).toBe(429);
  });
});

describe('SMTP AUTH: failed attempts per client address, across connections', () => {
  let ctx: TestContext;
  let smtp: RunningSmtpServer;
  let username = '';
  let password = '';

  beforeAll(async () => {
    ctx = await createTestContext({
      // Cleartext AUTH without development mode: no self-signed certificate to generate (slow).
      env: {
        POSTYARD_AUTH_FAILURES_PER_IP: '3',
        POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true',
        POSTYARD_DEV_MODE: 'false',
      },
    });
    const t = await createTenant(ctx, 'Shop <shop@example.com>');
    ({ username, password } = await ctx.c.smtpCredentials.create(t.tenantId, { name: 'bf' }));
    smtp = await startSmtpServer(ctx.c, { port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await smtp?.close();
    await ctx?.close();
  });

  async function connect(): Promise<RawClient> {
    const c = await RawClient.connect(smtp.port);
    expect(c.greeting).toMatch(/^220/);
    await c.cmd('EHLO client.test');
    return c;
  }

  it('successful AUTHs do not count; after the budget, AUTH is refused (421) before any password check', async () => {
    // Successes (more than the budget of 3) take nothing.
    for (let i = 0; i < 4; i++) {
      const c = await connect();
      expect(await c.authPlain(username, password)).toMatch(/^235/);
      await c.cmd('QUIT');
    }
    // Three failures spread over two connections (below the per-connection cap of 3) are answered 535.
    for (const tries of [2, 1]) {
      const c = await connect();
      for (let i = 0; i < tries; i++) expect(await c.authPlain(username, `wrong-${i}`)).toMatch(/^535 5\.7\.8/);
      await c.cmd('QUIT');
    }
    // A new connection: the fourth failure is refused with 421 and the connection closed.
    const fourth = await connect();
    expect(await fourth.authPlain(username, 'wrong-4')).toMatch(
      /^421 4\.7\.0 Too many failed authentication attempts from this address, try again in \d+ s$/,
    );
    expect(await fourth.waitClosed()).toBe(true);
    // While blocked, even the right password is refused: no scrypt work is spent on this address.
    const blocked = await connect();
    expect(await blocked.authPlain(username, password)).toMatch(/^421 4\.7\.0 Too many failed/);
    expect(await blocked.waitClosed()).toBe(true);
    // AUTH LOGIN is held back the same way.
    const login = await connect();
    const first = await login.cmd('AUTH LOGIN');
    const reply = first.startsWith('334')
      ? await login
          .cmd(Buffer.from(username).toString('base64'))
          .then(async (r) => (r.startsWith('334') ? login.cmd(Buffer.from(password).toString('base64')) : r))
      : first;
    expect(reply).toMatch(/^421 4\.7\.0 Too many failed/);
  });
});

describe('dashboard sign-in limits: one-time links, password changes, several nodes', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it.skipIf(DIALECT !== 'postgres')('PostgreSQL: the sign-in limits hold across nodes', async () => {
    const other = await createTestContext({ shareWith: ctx });
    try {
      const { email } = await signedInUser(ctx); // a success: takes nothing from any budget
      const ip = freshIp();
      for (let i = 0; i < 5; i++) {
        const node = i % 2 === 0 ? other : ctx;
        expect((await new DashClient(node.app, ip).login(email, `wrong password ${i}`)).statusCode).toBe(401);
      }
      // The address that failed five times is refused on either node, even with the right password...
      expect((await new DashClient(other.app, ip).login(email, PASSWORD)).statusCode).toBe(429);
      expect((await new DashClient(ctx.app, ip).login(email, PASSWORD)).statusCode).toBe(429);
      // ...and the email's lock is known on both: a second address that fails is refused next time.
      const second = freshIp();
      expect((await new DashClient(ctx.app, second).login(email, 'wrong password 5')).statusCode).toBe(401);
      expect((await new DashClient(other.app, second).login(email, PASSWORD)).statusCode).toBe(429);
    } finally {
      await other.close();
    }
  });

  it('guessing one-time links from one address: 20 tries (401 invalid_link), then 429 with Retry-After', async () => {
    const client = new DashClient(ctx.app);
    await client.session();
    for (let i = 0; i < 20; i++) {
      const res = await client.post('/dashboard/api/login/link', { token: randomBase62(43) });
      expect(res.statusCode, `try ${i + 1}`).toBe(401);
      expect((res.json() as { errors: { code: string }[] }).errors[0]?.code).toBe('invalid_link');
    }
    const res = await client.post('/dashboard/api/login/link', { token: randomBase62(43) });
    expect(res.statusCode).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('guessing the current password in a stolen session: 5 wrong tries, then 429 unheard, even when right', async () => {
    const { client } = await signedInUser(ctx);
    // The sign-in itself was a success and took nothing from the budget of 5 failures.
    for (let i = 0; i < 5; i++) {
      const res = await client.post('/dashboard/api/password', {
        password: 'a brand new password',
        current_password: `guess number ${i}`,
      });
      expect(res.statusCode, `guess ${i + 1}`).toBe(422);
    }
    // Past the budget a guess is not evaluated: the right password gets the same 429 as a wrong one.
    for (const current of ['guess number 6', PASSWORD]) {
      const res = await client.post('/dashboard/api/password', {
        password: 'a brand new password',
        current_password: current,
      });
      expect(res.statusCode, current).toBe(429);
    }
  });
});
