/**
 * Dashboard sign-in, sessions and CSRF over the real app (both backends): password and one-time
 * link sign-in, rate limits, CSRF on every state change, expiry, logout, and that a session never
 * opens the bearer-only /v1 API.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/lib/crypto.ts';
import { DEFAULT_ACCOUNT_FAILURES as ACCOUNT_FAILURES } from '../../src/modules/dashboard/sign-in-limits.ts';
import { call, createTenant, createTestContext, type TestContext } from '../helpers/context.ts';
import { DashClient, PASSWORD, setCookies, signedInUser } from './helpers.ts';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

async function newUser(password: string | null = PASSWORD, on: TestContext = ctx) {
  const tenant = await createTenant(on);
  const email = `u-${Math.random().toString(36).slice(2, 10)}@Example.com`;
  const user = await on.c.dashboard.createUser(tenant.tenantId, { email, ...(password ? { password } : {}) });
  return { tenant, email, user };
}

describe('password sign-in', () => {
  it('signs in, sets an httpOnly SameSite session cookie and reports the session', async () => {
    const { email, tenant } = await newUser();
    const client = new DashClient(ctx.app);
    const before = await client.session();
    expect(before.authenticated).toBe(false);
    expect(before.csrf_token).toMatch(/^[0-9A-Za-z]{43}$/);

    const res = await client.login(email.toUpperCase(), PASSWORD); // emails are case-insensitive
    expect(res.statusCode, res.body).toBe(200);
    const cookie = setCookies(res).postyard_session;
    expect(cookie?.value).toMatch(/^[0-9A-Za-z]{43}$/);
    expect(cookie?.raw).toMatch(/HttpOnly/);
    expect(cookie?.raw).toMatch(/SameSite=(Lax|Strict)/);
    expect(cookie?.raw).toMatch(/Path=\//);
    expect(cookie?.raw).not.toMatch(/Secure/); // plain http here; https adds Secure
    expect(res.headers['cache-control']).toBe('no-store');
    // Each cookie is set once (no repeated Set-Cookie lines).
    const lines = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
    expect(new Set(lines).size).toBe(lines.length);
    expect(lines.filter((l) => l.startsWith('postyard_session=')).length).toBe(1);

    const s = await client.session();
    expect(s).toMatchObject({
      authenticated: true,
      user: { email: email.toLowerCase() },
      tenant: { id: tenant.tenantId },
    });
    expect(s.csrf_token).not.toBe(before.csrf_token);
    // Only a hash of the token is stored.
    const rows = await ctx.c.database.db.selectFrom('dashboard_sessions').select('id').execute();
    expect(rows.map((r) => r.id)).toContain(sha256Hex(cookie?.value ?? ''));
    expect(rows.map((r) => r.id)).not.toContain(cookie?.value);
  });

  it('refuses a wrong password and an unknown email alike', async () => {
    const { email } = await newUser();
    const client = new DashClient(ctx.app);
    const wrong = await client.login(email, 'not the password');
    const unknown = await client.login('nobody@example.com', PASSWORD);
    for (const res of [wrong, unknown]) {
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({
        errors: [{ code: 'invalid_credentials', message: 'The email or password is incorrect' }],
      });
      expect(setCookies(res).postyard_session).toBeUndefined();
    }
    expect((await client.get('/dashboard/api/api-keys')).statusCode).toBe(401);
  });

  it('validates the body (422) and wants JSON (415)', async () => {
    const client = new DashClient(ctx.app);
    await client.session();
    expect((await client.post('/dashboard/api/login', { email: 'a@example.com' })).statusCode).toBe(422);
    const form = await client.request('POST', '/dashboard/api/login', {
      raw: 'email=a&password=b',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.statusCode).toBe(415);
  });
});

describe('sign-in rate limits', () => {
  it(`locks an account after ${ACCOUNT_FAILURES} failed attempts from any addresses (429 with Retry-After, even with the right password)`, async () => {
    const { email } = await newUser();
    const guesser = new DashClient(ctx.app);
    for (let i = 0; i < ACCOUNT_FAILURES; i++) {
      const res = await guesser.login(email, `wrong-${i}-password`);
      expect(res.statusCode).toBe(401);
    }
    for (const password of ['wrong-x-password', PASSWORD]) {
      const locked = await guesser.login(email, password);
      expect(locked.statusCode, password).toBe(429);
      expect(locked.json().errors[0].code).toBe('rate_limited');
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
    }
    // The lock is the account's: a browser at another address that never failed is refused too.
    expect((await new DashClient(ctx.app).login(email, PASSWORD)).statusCode).toBe(429);
    // Another account from another address is unaffected.
    const other = await newUser();
    expect((await new DashClient(ctx.app).login(other.email, PASSWORD)).statusCode).toBe(200);
  });

  it('counts failures only: signing in again and again is never refused', async () => {
    const { email } = await newUser();
    const client = new DashClient(ctx.app);
    for (let i = 0; i < 8; i++) {
      expect((await client.login(email, PASSWORD)).statusCode, `sign-in ${i + 1}`).toBe(200);
    }
    // A mistyped password in between still leaves the right one working.
    expect((await client.login(email, 'mistyped-password')).statusCode).toBe(401);
    expect((await client.login(email, PASSWORD)).statusCode).toBe(200);
  });

  it('locks a client address out after 20 failed attempts across emails', async () => {
    const client = new DashClient(ctx.app);
    for (let i = 0; i < 20; i++) {
      expect((await client.login(`nobody${i}@example.com`, 'whatever-password')).statusCode).toBe(401);
    }
    const { email } = await newUser();
    const res = await client.login(email, PASSWORD);
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBeDefined();
  });
});

describe('trusted devices (here with POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT=3)', () => {
  const LOCK = 3;
  let lim: TestContext;
  beforeAll(async () => {
    lim = await createTestContext({ env: { POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT: String(LOCK) } });
  });
  afterAll(async () => {
    await lim?.close();
  });

  /** Wrong passwords from `n` fresh addresses (fresh browsers): what a guesser rotating addresses does. */
  async function guessFromFreshAddresses(email: string, n: number): Promise<number[]> {
    const codes: number[] = [];
    for (let i = 0; i < n; i++)
      codes.push((await new DashClient(lim.app).login(email, `wrong-${i}-password`)).statusCode);
    return codes;
  }

  it("someone else's wrong guesses do not lock the owner out of a browser that signed in before (trusted device)", async () => {
    const { email } = await newUser(PASSWORD, lim);
    const owner = new DashClient(lim.app);
    const first = await owner.login(email, PASSWORD);
    expect(first.statusCode).toBe(200);
    const device = setCookies(first).postyard_device;
    expect(device?.value).toMatch(/^1\.[0-9a-f-]{36}\.[0-9A-Za-z]{22}\.\d+\.[A-Za-z0-9_-]{43}$/);
    expect(device?.raw).toMatch(/HttpOnly/);
    expect(device?.raw).toMatch(/SameSite=Strict/);
    expect(device?.raw).toMatch(/Path=\/dashboard\/api(;|$)/);
    expect(device?.raw).toMatch(/Max-Age=7776000/); // 90 days
    // Signing out ends the session, not the trust in the browser.
    expect((await owner.post('/dashboard/api/logout')).statusCode).toBe(204);
    expect(owner.cookies.get('postyard_device')).toBe(device?.value);

    expect(await guessFromFreshAddresses(email, LOCK)).toEqual(Array(LOCK).fill(401));
    // Locked: a browser that never signed in is refused unheard, even with the right password...
    expect((await new DashClient(lim.app).login(email, PASSWORD)).statusCode).toBe(429);
    // ...and the owner's browser signs in; each sign-in renews its trust.
    const again = await owner.login(email, PASSWORD);
    expect(again.statusCode).toBe(200);
    expect(setCookies(again).postyard_device?.value.split('.')[2]).toBe(device?.value.split('.')[2]);
  });

  it('a trusted device has a budget of its own: 5 wrong passwords, then 429 for it, even with the right one', async () => {
    const { email } = await newUser(PASSWORD, lim);
    const owner = new DashClient(lim.app);
    expect((await owner.login(email, PASSWORD)).statusCode).toBe(200);
    await guessFromFreshAddresses(email, LOCK);
    for (let i = 0; i < 5; i++) expect((await owner.login(email, `typo-${i}-password`)).statusCode).toBe(401);
    expect((await owner.login(email, PASSWORD)).statusCode).toBe(429);
  });

  it('a device cookie trusts only its own account, unaltered, and not after the password changed', async () => {
    const a = await newUser(PASSWORD, lim);
    const b = await newUser(PASSWORD, lim);
    const browser = new DashClient(lim.app);
    expect((await browser.login(a.email, PASSWORD)).statusCode).toBe(200);
    const cookieOfA = browser.cookies.get('postyard_device') ?? '';
    await guessFromFreshAddresses(b.email, LOCK);
    // A's device is nobody's device for B.
    const other = new DashClient(lim.app);
    other.cookies.set('postyard_device', cookieOfA);
    expect((await other.login(b.email, PASSWORD)).statusCode).toBe(429);
    // A cookie for A with another user id, device id or expiry, or a changed mac, is not trusted.
    await guessFromFreshAddresses(a.email, LOCK);
    const [v, user, device, expires, mac] = cookieOfA.split('.') as [string, string, string, string, string];
    const flip = (x: string) => `${x.slice(0, -1)}${x.endsWith('A') ? 'B' : 'A'}`;
    for (const forged of [
      [v, b.user.id, device, expires, mac],
      [v, user, flip(device), expires, mac],
      [v, user, device, String(Number(expires) + 1), mac],
      [v, user, device, expires, flip(mac)],
    ]) {
      const c = new DashClient(lim.app);
      c.cookies.set('postyard_device', forged.join('.'));
      expect((await c.login(a.email, PASSWORD)).statusCode, forged.join('.')).toBe(429);
    }
    const trusted = new DashClient(lim.app);
    trusted.cookies.set('postyard_device', cookieOfA);
    expect((await trusted.login(a.email, PASSWORD)).statusCode).toBe(200);
    // A new password revokes every device but the browser that set it, which gets a new cookie.
    const changed = await trusted.post('/dashboard/api/password', {
      password: 'a brand new password',
      current_password: PASSWORD,
    });
    expect(changed.statusCode).toBe(204);
    expect(setCookies(changed).postyard_device?.value).not.toBe(cookieOfA);
    const revoked = new DashClient(lim.app);
    revoked.cookies.set('postyard_device', cookieOfA);
    expect((await revoked.login(a.email, 'a brand new password')).statusCode).toBe(429);
    await trusted.post('/dashboard/api/logout');
    expect((await trusted.login(a.email, 'a brand new password')).statusCode).toBe(200);
  });
});

describe('CSRF', () => {
  it('refuses sign-in without or with a wrong pre-session token', async () => {
    const { email } = await newUser();
    const client = new DashClient(ctx.app);
    await client.session();
    const missing = await client.request('POST', '/dashboard/api/login', {
      body: { email, password: PASSWORD },
      csrf: null,
    });
    expect(missing.statusCode).toBe(403);
    expect(missing.json().errors[0].code).toBe('csrf_failed');
    const wrong = await client.request('POST', '/dashboard/api/login', {
      body: { email, password: PASSWORD },
      csrf: 'A'.repeat(43),
    });
    expect(wrong.statusCode).toBe(403);
    // Without the cookie the header alone is not enough (double submit).
    const token = client.csrf;
    client.cookies.clear();
    const noCookie = await client.request('POST', '/dashboard/api/login', {
      body: { email, password: PASSWORD },
      csrf: token,
    });
    expect(noCookie.statusCode).toBe(403);
  });

  it('refuses every state change of a signed-in session without the session token', async () => {
    const { client } = await signedInUser(ctx);
    const good = client.csrf;
    const attempts: [string, 'POST' | 'PATCH' | 'DELETE', unknown][] = [
      ['/dashboard/api/api-keys', 'POST', { name: 'k', scopes: ['read:events'] }],
      ['/dashboard/api/smtp-credentials', 'POST', { name: 'c' }],
      [
        '/dashboard/api/suppressions',
        'POST',
        { identifier: 'a@example.com', type: 'email', reason_category: 'manual' },
      ],
      ['/dashboard/api/webhooks', 'POST', { url: 'http://127.0.0.1:9/h' }],
      ['/dashboard/api/api-keys/00000000-0000-7000-8000-000000000000', 'DELETE', undefined],
      ['/dashboard/api/webhooks/00000000-0000-7000-8000-000000000000', 'PATCH', { enabled: false }],
      ['/dashboard/api/logout', 'POST', undefined],
    ];
    for (const [url, method, body] of attempts) {
      for (const csrf of [null, 'x', `${good.slice(0, -1)}${good.endsWith('a') ? 'b' : 'a'}`]) {
        const res = await client.request(method, url, { ...(body ? { body } : {}), csrf });
        expect(res.statusCode, `${method} ${url} csrf=${csrf}`).toBe(403);
      }
    }
    // A token from another site's form is refused even when correct.
    const cross = await client.request('POST', '/dashboard/api/smtp-credentials', {
      body: { name: 'c' },
      headers: { origin: 'https://evil.example' },
    });
    expect(cross.statusCode).toBe(403);
    const fetchMeta = await client.request('POST', '/dashboard/api/smtp-credentials', {
      body: { name: 'c' },
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    expect(fetchMeta.statusCode).toBe(403);
    // Nothing was created; the right token works.
    expect((await client.get('/dashboard/api/smtp-credentials')).json().data).toEqual([]);
    expect((await client.post('/dashboard/api/smtp-credentials', { name: 'ok' })).statusCode).toBe(201);
    const sameOrigin = await client.request('POST', '/dashboard/api/smtp-credentials', {
      body: { name: 'ok2' },
      headers: { origin: 'http://localhost:80', host: 'localhost:80' },
    });
    expect(sameOrigin.statusCode).toBe(201);
  });
});

describe('session lifetime', () => {
  it('ends at logout: the cookie is cleared and the old token no longer works', async () => {
    const { client } = await signedInUser(ctx);
    const token = client.cookies.get('postyard_session') ?? '';
    const res = await client.post('/dashboard/api/logout');
    expect(res.statusCode).toBe(204);
    expect(setCookies(res).postyard_session?.raw).toMatch(/Max-Age=0/);
    const replay = new DashClient(ctx.app);
    replay.cookies.set('postyard_session', token);
    expect((await replay.get('/dashboard/api/api-keys')).statusCode).toBe(401);
    expect((await replay.session()).authenticated).toBe(false);
  });

  it('expires: an expired session is refused (401) and its cookie cleared', async () => {
    const { client } = await signedInUser(ctx);
    expect((await client.get('/dashboard/api/api-keys')).statusCode).toBe(200);
    const id = sha256Hex(client.cookies.get('postyard_session') ?? '');
    await ctx.c.database.db
      .updateTable('dashboard_sessions')
      .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
      .where('id', '=', id)
      .execute();
    const res = await client.get('/dashboard/api/api-keys');
    expect(res.statusCode).toBe(401);
    expect(res.json().errors[0].code).toBe('unauthorized');
    expect(setCookies(res).postyard_session?.raw).toMatch(/Max-Age=0/);
  });

  it('slides the idle expiry forward on use, never past the absolute limit', async () => {
    const { client } = await signedInUser(ctx);
    const id = sha256Hex(client.cookies.get('postyard_session') ?? '');
    const db = ctx.c.database.db;
    const old = new Date(Date.now() - 5 * 60_000).toISOString();
    await db
      .updateTable('dashboard_sessions')
      .set({ last_seen_at: old, expires_at: new Date(Date.now() + 60_000).toISOString() })
      .where('id', '=', id)
      .execute();
    expect((await client.get('/dashboard/api/api-keys')).statusCode).toBe(200);
    const row = await db.selectFrom('dashboard_sessions').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(Date.parse(row.expires_at)).toBeGreaterThan(Date.now() + 11 * 3600_000);
    // Created 7 days ago: the absolute limit ends it.
    const created = new Date(Date.now() - 7 * 24 * 3600_000 + 1000).toISOString();
    await db
      .updateTable('dashboard_sessions')
      .set({ created_at: created, last_seen_at: old })
      .where('id', '=', id)
      .execute();
    expect((await client.get('/dashboard/api/api-keys')).statusCode).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await client.get('/dashboard/api/api-keys')).statusCode).toBe(401);
  });
});

describe('one-time sign-in links', () => {
  it('signs in once; a second use, an expired or a made-up link fail', async () => {
    const { email } = await newUser(null);
    const link = await ctx.c.dashboard.createLoginLink(email);
    const client = new DashClient(ctx.app);
    await client.session();
    const res = await client.post('/dashboard/api/login/link', { token: link.token });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      authenticated: true,
      user: { has_password: false },
      password_reset_allowed: true,
    });

    const again = new DashClient(ctx.app);
    await again.session();
    const reused = await again.post('/dashboard/api/login/link', { token: link.token });
    expect(reused.statusCode).toBe(401);
    expect(reused.json().errors[0].code).toBe('invalid_link');
    expect((await again.post('/dashboard/api/login/link', { token: 'x'.repeat(43) })).statusCode).toBe(401);

    const expired = await ctx.c.dashboard.createLoginLink(email);
    await ctx.c.database.db
      .updateTable('dashboard_login_links')
      .set({ expires_at: new Date(Date.now() - 1).toISOString() })
      .where('id', '=', sha256Hex(expired.token))
      .execute();
    expect((await again.post('/dashboard/api/login/link', { token: expired.token })).statusCode).toBe(401);
  });

  it('lets a link session set a password, then password sign-in works and other sessions end', async () => {
    const { email } = await newUser(null);
    // No password yet: password sign-in cannot work.
    expect((await new DashClient(ctx.app).login(email, '')).statusCode).toBe(401);
    const a = new DashClient(ctx.app);
    await a.session();
    a.csrf = (
      await a.post('/dashboard/api/login/link', { token: (await ctx.c.dashboard.createLoginLink(email)).token })
    ).json().csrf_token;
    const b = new DashClient(ctx.app);
    await b.session();
    b.csrf = (
      await b.post('/dashboard/api/login/link', { token: (await ctx.c.dashboard.createLoginLink(email)).token })
    ).json().csrf_token;

    expect((await a.post('/dashboard/api/password', { password: 'short' })).statusCode).toBe(422);
    expect((await a.post('/dashboard/api/password', { password: 'a brand new password' })).statusCode).toBe(204);
    expect((await a.get('/dashboard/api/api-keys')).statusCode).toBe(200);
    expect((await b.get('/dashboard/api/api-keys')).statusCode).toBe(401);
    expect((await new DashClient(ctx.app).login(email, 'a brand new password')).statusCode).toBe(200);
  });

  it('needs the current password in a password session', async () => {
    const { client } = await signedInUser(ctx);
    const res = await client.post('/dashboard/api/password', { password: 'another new password' });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors[0].field).toBe('current_password');
    const ok = await client.post('/dashboard/api/password', {
      password: 'another new password',
      current_password: PASSWORD,
    });
    expect(ok.statusCode).toBe(204);
  });
});

describe('separation from the API', () => {
  it('a session cookie never authenticates /v1, and a bearer key never authenticates the dashboard', async () => {
    const { client, tenant } = await signedInUser(ctx);
    const v1 = await client.get('/v1/api-keys');
    expect(v1.statusCode).toBe(401);
    expect(v1.headers['www-authenticate']).toBe('Bearer');
    const withKey = await call(ctx.app, 'GET', '/dashboard/api/api-keys', { key: tenant.apiKey });
    expect(withKey.statusCode).toBe(401);
  });

  it('keeps the dashboard out of the public OpenAPI document', async () => {
    const doc = (await call(ctx.app, 'GET', '/v1/openapi.json')).json() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith('/v1/'))).toEqual([]);
  });
});
