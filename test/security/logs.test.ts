/**
 * Nothing secret is logged (docs/security.md, "Logs"). A node whose logger writes every level
 * (trace) into memory goes through every path where a secret passes: API key creation and use,
 * wrong keys, SMTP credential creation, SMTP AUTH PLAIN and LOGIN (right and wrong), webhook
 * creation, rotation and test, dashboard sign-in (wrong, right, by link), a password change and
 * a sign-out. Then no form of any of those secrets may appear in the captured output, while the
 * lines that describe those events are there (so the capture demonstrably works).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { type RunningSmtpServer, startSmtpServer } from '../../src/smtp/server.ts';
import { DashClient } from '../dashboard/helpers.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { RawClient } from '../smtp/helpers.ts';
import { type CapturedLogs, captureLogs, type Node, nodeWithLogger, secretForms } from './helpers.ts';

const PASSWORD = 'the dashboard password 7';
const NEW_PASSWORD = 'the new dashboard password 8';
const NEAR_MISS = 'the dashboard password 6';

let ctx: TestContext;
let logs: CapturedLogs;
let node: Node;
let smtp: RunningSmtpServer;
let tenant: TestTenant;
const secrets: Record<string, string> = {};

beforeAll(async () => {
  ctx = await createTestContext();
  logs = captureLogs('trace');
  // Cleartext AUTH without development mode: no self-signed certificate to generate (slow).
  node = await nodeWithLogger(ctx, logs.logger, {
    POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true',
    POSTYARD_DEV_MODE: 'false',
  });
  smtp = await startSmtpServer(node.c, { port: 0, host: '127.0.0.1' });
  tenant = await createTenant(ctx, 'Shop <shop@example.com>');
  secrets.tenantKey = tenant.apiKey;
  secrets.masterKey = node.c.masterKey.toString('hex');
});

afterAll(async () => {
  await smtp?.close();
  await node?.close();
  await ctx?.close();
});

async function exercise() {
  const app = node.app;
  const key = tenant.apiKey;
  // API keys: create (idempotent, then replayed), use, misuse.
  const created = await call(app, 'POST', '/v1/api-keys', {
    key,
    body: { name: 'logged', scopes: ['manage:webhooks', 'manage:smtp-credentials'] },
    headers: { 'idempotency-key': 'log-key-1' },
  });
  expect(created.statusCode).toBe(201);
  secrets.apiKey = (created.json() as { key: string }).key;
  await call(app, 'POST', '/v1/api-keys', {
    key,
    body: { name: 'logged', scopes: ['manage:webhooks', 'manage:smtp-credentials'] },
    headers: { 'idempotency-key': 'log-key-1' },
  });
  expect((await call(app, 'GET', '/v1/webhooks', { key: secrets.apiKey })).statusCode).toBe(200);
  expect((await call(app, 'GET', '/v1/api-keys', { key: secrets.apiKey })).statusCode).toBe(403);
  // One character changed: the key with its last character replaced by another one (a key
  // ending in `0` made a "changed" key equal to the real one, once in 62 runs).
  const changed = `${secrets.apiKey.slice(0, -1)}${secrets.apiKey.endsWith('0') ? '1' : '0'}`;
  expect((await call(app, 'GET', '/v1/webhooks', { key: changed })).statusCode).toBe(401);
  expect((await call(app, 'GET', `/v1/webhooks?cursor=${secrets.apiKey}`, { key })).statusCode).toBe(400);

  // SMTP credential, then AUTH right and wrong (PLAIN and LOGIN).
  const cred = await call(app, 'POST', '/v1/smtp-credentials', { key: secrets.apiKey, body: { name: 'logged' } });
  expect(cred.statusCode).toBe(201);
  const { username, password } = cred.json() as { username: string; password: string };
  secrets.smtpPassword = password;
  secrets.authPlainOk = Buffer.from(`\0${username}\0${password}`).toString('base64');
  secrets.authPlainWrong = Buffer.from(`\0${username}\0${password.slice(0, -1)}!`).toString('base64');
  secrets.authLoginPassword = Buffer.from(password).toString('base64');
  const ok = await RawClient.connect(smtp.port);
  await ok.cmd('EHLO client.test');
  expect(await ok.cmd(`AUTH PLAIN ${secrets.authPlainOk}`)).toMatch(/^235/);
  await ok.cmd('QUIT');
  const wrong = await RawClient.connect(smtp.port);
  await wrong.cmd('EHLO client.test');
  expect(await wrong.cmd(`AUTH PLAIN ${secrets.authPlainWrong}`)).toMatch(/^535/);
  expect(await wrong.cmd('AUTH LOGIN')).toMatch(/^334/);
  expect(await wrong.cmd(Buffer.from('smtp_nobody').toString('base64'))).toMatch(/^334/);
  expect(await wrong.cmd(secrets.authLoginPassword)).toMatch(/^535/);
  await wrong.cmd('QUIT');

  // Webhooks: create, rotate, test.
  const hook = await call(app, 'POST', '/v1/webhooks', {
    key: secrets.apiKey,
    body: { url: 'http://127.0.0.1:9/hook', events: ['*'] },
  });
  expect(hook.statusCode).toBe(201);
  const hookId = (hook.json() as { id: string }).id;
  secrets.webhookSecret = (hook.json() as { secret: string }).secret;
  const rotated = await call(app, 'POST', `/v1/webhooks/${hookId}/rotate-secret`, { key: secrets.apiKey });
  secrets.webhookRotated = (rotated.json() as { secret: string }).secret;
  expect((await call(app, 'POST', `/v1/webhooks/${hookId}/test`, { key: secrets.apiKey })).statusCode).toBe(200);

  // Dashboard: wrong password (a near miss), right password, a link, a password change, sign-out.
  const user = await node.c.dashboard.createUser(tenant.tenantId, { email: 'logs@example.com', password: PASSWORD });
  expect(user.id).toBeTruthy();
  secrets.dashboardPassword = PASSWORD;
  secrets.nearMiss = NEAR_MISS;
  secrets.newPassword = NEW_PASSWORD;
  expect((await new DashClient(app).login('logs@example.com', NEAR_MISS)).statusCode).toBe(401);
  const dash = new DashClient(app);
  expect((await dash.login('logs@example.com', PASSWORD)).statusCode).toBe(200);
  secrets.sessionToken = dash.cookies.get('postyard_session') ?? '';
  secrets.csrfToken = dash.csrf;
  expect((await dash.get('/dashboard/api/api-keys')).statusCode).toBe(200);
  const viaDash = await dash.post('/dashboard/api/api-keys', { name: 'dash key', scopes: ['read:events'] });
  secrets.dashboardApiKey = (viaDash.json() as { key: string }).key;
  const pw = await dash.post('/dashboard/api/password', { password: NEW_PASSWORD, current_password: PASSWORD });
  expect(pw.statusCode).toBe(204);
  const link = await node.c.dashboard.createLoginLink('logs@example.com');
  secrets.linkToken = link.token;
  const byLink = new DashClient(app);
  await byLink.session();
  const linked = await byLink.post('/dashboard/api/login/link', { token: link.token });
  expect(linked.statusCode).toBe(200);
  byLink.csrf = (linked.json() as { csrf_token: string }).csrf_token;
  secrets.linkSession = byLink.cookies.get('postyard_session') ?? '';
  expect((await byLink.post('/dashboard/api/logout')).statusCode).toBe(204);
}

describe('log output', () => {
  it('holds no form of any secret that went through the API, SMTP AUTH or the dashboard', async () => {
    await exercise();
    const text = logs.text();
    // The capture works and covers the paths above.
    expect(logs.lines.length).toBeGreaterThan(20);
    expect(text).toContain('SMTP AUTH failed');
    expect(text).toContain('dashboard sign-in failed');
    expect(text).toContain('"url":"/v1/api-keys"');
    expect(text).toContain('"url":"/dashboard/api/login"');
    expect(text).toContain('"url":"/dashboard/api/password"');
    const needles: Record<string, string> = {};
    for (const [name, value] of Object.entries(secrets)) {
      expect(value.length, name).toBeGreaterThan(8);
      Object.assign(needles, secretForms(name, value));
    }
    const found = Object.entries(needles)
      .filter(([, n]) => text.includes(n))
      .map(([name]) => name);
    expect(found).toEqual([]);
  });

  it('redacts secret-named fields and credential headers wherever a log call puts them', () => {
    const lines: string[] = [];
    const log = createLogger('info', { write: (s: string) => void lines.push(s) });
    const s = 'S3CR3T-VALUE';
    log.info({ password: s, secret: s, key: s, api_key: s, token: s }, 'top level');
    log.info({ user: { password: s }, hook: { secret: s }, k: { key: s, api_key: s }, link: { token: s } }, 'nested');
    log.info({ req: { headers: { authorization: s, cookie: s, 'x-csrf-token': s } } }, 'request');
    log.info({ headers: { authorization: s, cookie: s, 'x-csrf-token': s } }, 'headers');
    log.info({ res: { headers: { cookie: s } } }, 'nested headers');
    expect(lines).toHaveLength(5);
    const text = lines.join('');
    expect(text).not.toContain(s);
    expect(text.match(/\[redacted\]/g)?.length).toBe(17);
  });
});
