/**
 * Brute force on credentials (docs/security.md, "Brute force"): failed API keys and failed SMTP
 * AUTHs are budgeted per client address (POSTYARD_AUTH_FAILURES_PER_IP, shared across nodes), an
 * IPv6 client by its /64; the dashboard's sign-in limits also cover one-time links and password
 * changes, and hold per account across addresses (issue 31: rotating addresses of one /64, or
 * IPv4 addresses, bought a guess each) while the owner's trusted devices still sign in. Password
 * sign-in limits themselves are proven in test/dashboard/auth.test.ts ("sign-in rate limits",
 * "trusted devices"), and the per-connection SMTP cap in test/smtp/auth.test.ts.
 */
import net from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/lib/crypto.ts';
import { DEFAULT_ACCOUNT_FAILURES as ACCOUNT_FAILURES } from '../../src/modules/dashboard/sign-in-limits.ts';
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

  it('one IPv6 /64 is one client address, and an IPv4-mapped IPv6 client is its IPv4 address', async () => {
    // Every wrong key from another address of 2001:db8:40:1::/64: one budget, not one per address.
    for (let i = 1; i <= LIMIT; i++) {
      expect((await get(a, `2001:db8:40:1::${i.toString(16)}`, wrongKey())).statusCode, `address ${i}`).toBe(401);
    }
    expect((await get(a, '2001:db8:40:1:ffff:ffff:ffff:fffe', wrongKey())).statusCode).toBe(429);
    expect((await get(a, '2001:db8:40:2::1', wrongKey())).statusCode).toBe(401); // the next /64
    for (let i = 0; i < LIMIT; i++) expect((await get(a, '203.0.113.60', wrongKey())).statusCode).toBe(401);
    expect((await get(a, '::ffff:203.0.113.60', wrongKey())).statusCode).toBe(429);
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

describe('SMTP AUTH: an IPv6 client is budgeted by its /64 (client addresses from a PROXY balancer)', () => {
  let ctx: TestContext;
  let smtp: RunningSmtpServer;
  let username = '';

  beforeAll(async () => {
    ctx = await createTestContext({
      env: {
        POSTYARD_AUTH_FAILURES_PER_IP: '3',
        POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true',
        POSTYARD_DEV_MODE: 'false',
        POSTYARD_SMTP_PROXY_PROTOCOL: '127.0.0.1',
      },
    });
    const t = await createTenant(ctx, 'Shop <shop@example.com>');
    ({ username } = await ctx.c.smtpCredentials.create(t.tenantId, { name: 'bf6' }));
    smtp = await startSmtpServer(ctx.c, { port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await smtp?.close();
    await ctx?.close();
  });

  /** A connection the balancer opened for `client`, past EHLO. */
  async function from(client: string): Promise<RawClient> {
    const socket = net.connect({ host: '127.0.0.1', port: smtp.port });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('error', reject);
    });
    socket.write(`PROXY TCP6 ${client} ::1 40000 ${smtp.port}\r\n`);
    const c = await RawClient.over(socket);
    expect(c.greeting).toMatch(/^220/);
    await c.cmd('EHLO client.test');
    return c;
  }

  it('wrong passwords from rotating addresses of one /64 share its budget', async () => {
    for (let i = 1; i <= 3; i++) {
      const c = await from(`2001:db8:25:1::${i}`);
      expect(await c.authPlain(username, `wrong-${i}`)).toMatch(/^535 5\.7\.8/);
      await c.cmd('QUIT');
    }
    const fourth = await from('2001:db8:25:1:abcd::4');
    expect(await fourth.authPlain(username, 'wrong-4')).toMatch(/^421 4\.7\.0 Too many failed authentication/);
    // Another /64 has its own budget.
    const other = await from('2001:db8:25:2::1');
    expect(await other.authPlain(username, 'wrong-5')).toMatch(/^535 5\.7\.8/);
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
      // The account's budget, spent from addresses that change at every try, on both nodes...
      for (let i = 0; i < ACCOUNT_FAILURES; i++) {
        const node = i % 2 === 0 ? other : ctx;
        expect((await new DashClient(node.app).login(email, `wrong password ${i}`)).statusCode).toBe(401);
      }
      // ...locks it on either node for a browser that has not signed in before, right password or not.
      expect((await new DashClient(other.app).login(email, PASSWORD)).statusCode).toBe(429);
      expect((await new DashClient(ctx.app).login(email, PASSWORD)).statusCode).toBe(429);
      // An address's budget is known on both nodes too: 20 failures over two nodes, then 429.
      const ip = freshIp();
      for (let i = 0; i < 20; i++) {
        const node = i % 2 === 0 ? other : ctx;
        expect((await new DashClient(node.app, ip).login(`nobody${i}@example.com`, 'wrong')).statusCode).toBe(401);
      }
      expect((await new DashClient(other.app, ip).login('nobody-else@example.com', 'wrong')).statusCode).toBe(429);
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

  it(`guessing the current password in a stolen session: ${ACCOUNT_FAILURES} wrong tries, then 429 unheard, even when right`, async () => {
    const { client } = await signedInUser(ctx);
    // The thief has the session cookie and its CSRF token, not the browser's trusted-device cookie.
    const thief = new DashClient(ctx.app);
    thief.cookies.set('postyard_session', client.cookies.get('postyard_session') ?? '');
    thief.csrf = client.csrf;
    // The sign-in itself was a success and took nothing from the account's budget of failures.
    for (let i = 0; i < ACCOUNT_FAILURES; i++) {
      const res = await thief.post('/dashboard/api/password', {
        password: 'a brand new password',
        current_password: `guess number ${i}`,
      });
      expect(res.statusCode, `guess ${i + 1}`).toBe(422);
    }
    // Past the budget a guess is not evaluated: the right password gets the same 429 as a wrong one.
    for (const current of ['guess number x', PASSWORD]) {
      const res = await thief.post('/dashboard/api/password', {
        password: 'a brand new password',
        current_password: current,
      });
      expect(res.statusCode, current).toBe(429);
    }
  });
});

describe('dashboard sign-in: guesses from rotating client addresses (issue 31)', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  /** One wrong password for `email` from each address, each in a fresh browser; the answers. */
  async function guesses(email: string, addresses: string[]): Promise<number[]> {
    const codes: number[] = [];
    for (const [i, ip] of addresses.entries()) {
      codes.push((await new DashClient(ctx.app, ip).login(email, `guess number ${i}`)).statusCode);
    }
    return codes;
  }
  const of64 = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${(i + 1).toString(16)}`);
  const checked = (n: number): number[] => Array(n).fill(401);
  const refused = (n: number): number[] => Array(n).fill(429);

  it(`30 guesses from 30 addresses of one /64 stop after the account's budget (${ACCOUNT_FAILURES} checked)`, async () => {
    const { email } = await signedInUser(ctx);
    const codes = await guesses(email, of64('2001:db8:31:1::', 30));
    expect(codes).toEqual([...checked(ACCOUNT_FAILURES), ...refused(30 - ACCOUNT_FAILURES)]);
    // The owner's password, from a browser that never signed in, is refused too (locked).
    expect((await new DashClient(ctx.app, '2001:db8:31:2::1').login(email, PASSWORD)).statusCode).toBe(429);
  });

  it(`rotating IPv4 addresses too: 30 guesses from 30 addresses, ${ACCOUNT_FAILURES} checked`, async () => {
    const { email } = await signedInUser(ctx);
    const addresses = Array.from({ length: 30 }, (_, i) => `198.51.${100 + (i % 3)}.${i + 1}`);
    const codes = await guesses(email, addresses);
    expect(codes).toEqual([...checked(ACCOUNT_FAILURES), ...refused(30 - ACCOUNT_FAILURES)]);
  });

  it('one /64 is one client address: 20 failures across accounts from its addresses, then 429', async () => {
    const codes: number[] = [];
    for (const [i, ip] of of64('2001:db8:32:1::', 25).entries()) {
      codes.push((await new DashClient(ctx.app, ip).login(`nobody${i}@example.com`, 'guess')).statusCode);
    }
    expect(codes).toEqual([...checked(20), ...refused(5)]);
  });

  it("a trusted device still signs in while the account is locked for others, even from the guesser's /64", async () => {
    const { email } = await signedInUser(ctx);
    const owner = new DashClient(ctx.app, '2001:db8:33:1::1');
    expect((await owner.login(email, PASSWORD)).statusCode).toBe(200);
    expect(owner.cookies.get('postyard_device')).toBeDefined();
    await owner.post('/dashboard/api/logout');
    // A guesser in the same /64 spends the account's budget and then the address's.
    const guesser = of64('2001:db8:33:1::', 30).slice(1);
    expect(await guesses(email, guesser.slice(0, ACCOUNT_FAILURES))).toEqual(checked(ACCOUNT_FAILURES));
    for (const [i, ip] of guesser.slice(ACCOUNT_FAILURES, 20).entries()) {
      expect((await new DashClient(ctx.app, ip).login(`nobody${i}@example.com`, 'guess')).statusCode).toBe(401);
    }
    // Locked twice over for a browser that never signed in here, right password or not...
    expect((await new DashClient(ctx.app, '2001:db8:33:1::ffff').login(email, PASSWORD)).statusCode).toBe(429);
    expect((await new DashClient(ctx.app, '2001:db8:34:1::1').login(email, PASSWORD)).statusCode).toBe(429);
    // ...while the owner's browser signs in, from another address of that /64 (a new privacy address).
    const ownerNow = new DashClient(ctx.app, '2001:db8:33:1::beef');
    ownerNow.cookies = owner.cookies;
    expect((await ownerNow.login(email, PASSWORD)).statusCode).toBe(200);
  });
});
