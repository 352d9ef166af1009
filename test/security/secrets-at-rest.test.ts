/**
 * Secrets at rest (docs/security.md, "Database and master key"): after every kind of secret has
 * been made through the real API (with Idempotency-Key, so the stored replay bodies are covered
 * too), the database is read directly, row by row and column by column, and none of the raw
 * secrets is found. Each secret's stored form is checked as well: API keys and dashboard tokens as
 * SHA-256, passwords as scrypt, webhook secrets and DKIM private keys sealed with the master key
 * (AES-256-GCM: they decrypt with it and with no other key).
 */
import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret, sha256Hex, verifyPassword } from '../../src/lib/crypto.ts';
import { DashClient } from '../dashboard/helpers.ts';
import {
  call,
  createTenant,
  DIALECT,
  createTestContext,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { dumpAllRows, findInRows, secretForms } from './helpers.ts';

const DASH_PASSWORD = 'dashboard password at rest 42';

let ctx: TestContext;
let tenant: TestTenant;
const secrets: Record<string, string> = {};
const ids: Record<string, string> = {};
let dkimPem = '';

beforeAll(async () => {
  ctx = await createTestContext();
  tenant = await createTenant(ctx);
  const key = tenant.apiKey;
  const post = async (url: string, body: unknown, idem: string) => {
    const res = await call(ctx.app, 'POST', url, { key, body, headers: { 'idempotency-key': idem } });
    expect(res.statusCode, `${url}: ${res.body}`).toBeLessThan(300);
    // The replay must work from what was stored (and, per the contract, without the secret).
    const replay = await call(ctx.app, 'POST', url, { key, body, headers: { 'idempotency-key': idem } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    return res.json() as Record<string, string>;
  };

  secrets.firstKey = key;
  const apiKey = await post('/v1/api-keys', { name: 'at rest', scopes: ['read:events'] }, 'k-1');
  secrets.apiKey = apiKey.key as string;
  ids.apiKey = apiKey.id as string;

  const cred = await post('/v1/smtp-credentials', { name: 'at rest' }, 'c-1');
  secrets.smtpPassword = cred.password as string;
  ids.smtp = cred.id as string;

  const hook = await post('/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['*'] }, 'w-1');
  secrets.webhookFirst = hook.secret as string;
  ids.webhook = hook.id as string;
  const rotated = await call(ctx.app, 'POST', `/v1/webhooks/${ids.webhook}/rotate-secret`, { key });
  expect(rotated.statusCode).toBe(200);
  secrets.webhookRotated = (rotated.json() as { secret: string }).secret;

  const domain = await post('/v1/sending-domains', { domain: 'at-rest.example.test' }, 'd-1');
  ids.domain = domain.id as string;

  // Dashboard: a password, a session (cookie token) and a one-time link.
  const user = await ctx.c.dashboard.createUser(tenant.tenantId, {
    email: 'rest@example.com',
    password: DASH_PASSWORD,
  });
  ids.user = user.id;
  secrets.dashboardPassword = DASH_PASSWORD;
  const client = new DashClient(ctx.app);
  expect((await client.login('rest@example.com', DASH_PASSWORD)).statusCode).toBe(200);
  secrets.sessionToken = client.cookies.get('postyard_session') ?? '';
  expect(secrets.sessionToken.length).toBeGreaterThan(30);
  secrets.linkToken = (await ctx.c.dashboard.createLoginLink('rest@example.com')).token;

  secrets.masterKeyHex = ctx.c.masterKey.toString('hex');
  secrets.masterKeyBase64 = ctx.c.masterKey.toString('base64');

  const row = await ctx.c.database.db
    .selectFrom('sending_domains')
    .selectAll()
    .where('id', '=', ids.domain)
    .executeTakeFirstOrThrow();
  dkimPem = decryptSecret(ctx.c.masterKey, row.dkim_private_key);
});

afterAll(async () => {
  await ctx?.close();
});

/** The searched-for forms of every secret made above, plus distinctive lines of the DKIM key. */
function needles(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(secrets)) Object.assign(out, secretForms(name, value));
  // Two 64-character base64 lines from the middle of the PEM body.
  const body = dkimPem.split('\n').filter((l) => l && !l.startsWith('-----'));
  expect(body.length).toBeGreaterThan(10);
  out['DKIM private key (line 5)'] = body[5] ?? '';
  out['DKIM private key (line 10)'] = body[10] ?? '';
  return out;
}

describe('no raw secret anywhere in the database', () => {
  it('no table and column holds any secret made through the API or the dashboard', async () => {
    const rows = await dumpAllRows(ctx);
    // The dump really covers the stores the secrets went through (else the search means nothing).
    const tables = new Set(rows.map((r) => r.table));
    for (const t of ['api_keys', 'smtp_credentials', 'webhooks', 'sending_domains', 'idempotency_keys']) {
      expect(tables, t).toContain(t);
    }
    for (const t of ['dashboard_users', 'dashboard_sessions', 'dashboard_login_links']) expect(tables, t).toContain(t);
    expect(findInRows(rows, { 'an id (search self-check)': ids.webhook ?? '' }).length).toBeGreaterThan(0);
    expect(findInRows(rows, needles())).toEqual([]);
  });

  it.skipIf(DIALECT !== 'sqlite')(
    'SQLite: not in the raw database files either (WAL and free pages included)',
    async () => {
      const files = ['postyard.sqlite', 'postyard.sqlite-wal']
        .map((f) => join(ctx.dataDir, f))
        .filter((f) => existsSync(f));
      expect(files.length).toBeGreaterThan(0);
      const raw = Buffer.concat(files.map((f) => readFileSync(f))).toString('latin1');
      expect(raw).toContain(ids.webhook); // self-check: the files hold the data
      const found = Object.entries(needles())
        .filter(([, needle]) => raw.includes(needle))
        .map(([what]) => what);
      expect(found).toEqual([]);
    },
  );
});

describe('the stored form of each secret', () => {
  it('API keys: the SHA-256 of the key, and a 12-character prefix for display only', async () => {
    const row = await ctx.c.database.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', ids.apiKey ?? '')
      .executeTakeFirstOrThrow();
    expect(row.key_hash).toBe(sha256Hex(secrets.apiKey ?? ''));
    expect(row.key_prefix).toBe(secrets.apiKey?.slice(0, 12));
  });

  it('SMTP and dashboard passwords: salted scrypt (N=2^15) that verifies the password', async () => {
    const cred = await ctx.c.database.db
      .selectFrom('smtp_credentials')
      .select('password_hash')
      .where('id', '=', ids.smtp ?? '')
      .executeTakeFirstOrThrow();
    const user = await ctx.c.database.db
      .selectFrom('dashboard_users')
      .select('password_hash')
      .where('id', '=', ids.user ?? '')
      .executeTakeFirstOrThrow();
    for (const [hash, password] of [
      [cred.password_hash, secrets.smtpPassword],
      [user.password_hash ?? '', DASH_PASSWORD],
    ] as const) {
      expect(hash).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/);
      await expect(verifyPassword(password ?? '', hash)).resolves.toBe(true);
    }
    await expect(verifyPassword(`${secrets.smtpPassword}x`, cred.password_hash)).resolves.toBe(false);
  });

  it('dashboard session and link tokens: only their SHA-256 is stored', async () => {
    const db = ctx.c.database.db;
    const session = await db
      .selectFrom('dashboard_sessions')
      .select('id')
      .where('id', '=', sha256Hex(secrets.sessionToken ?? ''))
      .executeTakeFirst();
    expect(session).toBeDefined();
    const link = await db
      .selectFrom('dashboard_login_links')
      .select('id')
      .where('id', '=', sha256Hex(secrets.linkToken ?? ''))
      .executeTakeFirst();
    expect(link).toBeDefined();
  });

  it('webhook secrets (current and rotated-out): sealed with the master key and no other', async () => {
    const row = await ctx.c.database.db
      .selectFrom('webhooks')
      .select(['secret_enc', 'previous_secret_enc'])
      .where('id', '=', ids.webhook ?? '')
      .executeTakeFirstOrThrow();
    expect(row.secret_enc).toMatch(/^v1:/);
    expect(decryptSecret(ctx.c.masterKey, row.secret_enc)).toBe(secrets.webhookRotated);
    expect(decryptSecret(ctx.c.masterKey, row.previous_secret_enc ?? '')).toBe(secrets.webhookFirst);
    expect(() => decryptSecret(randomBytes(32), row.secret_enc)).toThrow();
    // Tampering with the ciphertext is detected (GCM tag), not decrypted to garbage.
    const parts = row.secret_enc.split(':');
    const ct = Buffer.from(parts[3] ?? '', 'base64');
    ct[0] = (ct[0] ?? 0) ^ 1;
    expect(() => decryptSecret(ctx.c.masterKey, [...parts.slice(0, 3), ct.toString('base64')].join(':'))).toThrow();
  });

  it('DKIM private keys: sealed with the master key, and the key matches the published p= record', async () => {
    const row = await ctx.c.database.db
      .selectFrom('sending_domains')
      .select(['dkim_private_key', 'dkim_public_key'])
      .where('id', '=', ids.domain ?? '')
      .executeTakeFirstOrThrow();
    expect(row.dkim_private_key).toMatch(/^v1:/);
    expect(row.dkim_private_key).not.toContain('PRIVATE KEY');
    expect(() => decryptSecret(randomBytes(32), row.dkim_private_key)).toThrow();
    const pub = createPublicKey(createPrivateKey(dkimPem)).export({ type: 'spki', format: 'der' }).toString('base64');
    expect(pub).toBe(row.dkim_public_key);
  });

  it('the API never hands a secret out again: lists and reads carry none', async () => {
    const key = tenant.apiKey;
    const bodies = await Promise.all(
      [
        '/v1/api-keys',
        '/v1/smtp-credentials',
        '/v1/webhooks',
        `/v1/webhooks/${ids.webhook}`,
        `/v1/sending-domains/${ids.domain}`,
      ].map(async (url) => (await call(ctx.app, 'GET', url, { key })).body),
    );
    const all = bodies.join('\n');
    expect(all).toContain(ids.webhook);
    const leaked = Object.entries(needles()).filter(([name, n]) => !name.startsWith('firstKey') && all.includes(n));
    expect(leaked.map(([name]) => name)).toEqual([]);
    expect(all).not.toContain('PRIVATE KEY');
  });

  it('the generated master key file is readable by its owner only (0600)', () => {
    if (ctx.env.POSTYARD_MASTER_KEY) return;
    const mode = statSync(join(ctx.dataDir, 'master.key')).mode & 0o777;
    expect(mode.toString(8)).toBe('600');
  });
});
