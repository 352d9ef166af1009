/**
 * AUTH and TLS of the submission server (docs/smtp.md "Connecting"): STARTTLS with the dev
 * certificate or a configured one, implicit TLS, AUTH only after STARTTLS unless allowed, bad
 * credentials 535 5.7.8 at AUTH time, MAIL before AUTH 530 5.7.0, deleted credentials.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDomain, BOUNCE_HOST, publish, verifyDomain } from '../domains/helpers.ts';
import { call } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import {
  mailer,
  message,
  newCredential,
  queuedId,
  RawClient,
  type SmtpSetup,
  sendRaw,
  setupSmtp,
  swaks,
  swaksAuth,
} from './helpers.ts';

const CERTS = fileURLToPath(new URL('../peers/certs/', import.meta.url));

describe('development mode (self-signed certificate in the data dir)', () => {
  let s: SmtpSetup;
  beforeAll(async () => {
    s = await setupSmtp({ POSTYARD_AUTH_CACHE_SECONDS: '0' });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('EHLO advertises STARTTLS, AUTH PLAIN LOGIN, SIZE, PIPELINING, 8BITMIME, ENHANCEDSTATUSCODES', async () => {
    const c = await RawClient.connect(s.smtp.port);
    const ehlo = await c.cmd('EHLO client.test');
    for (const ext of [
      'STARTTLS',
      'AUTH PLAIN LOGIN',
      'SIZE 26214400',
      'PIPELINING',
      '8BITMIME',
      'ENHANCEDSTATUSCODES',
    ]) {
      expect(ehlo.split('\n').map((l) => l.slice(4))).toContain(ext);
    }
    expect(ehlo).not.toContain('SMTPUTF8');
    c.destroy();
  });

  it('keeps the generated certificate in the data dir and serves it', async () => {
    const pem = readFileSync(join(s.ctx.dataDir, 'smtp-tls', 'cert.pem'), 'utf8');
    expect(pem).toMatch(/^-----BEGIN CERTIFICATE-----/);
    const r = await swaks([...swaksAuth(s.smtp.port, s.cred, 'LOGIN'), '--quit-after', 'AUTH']);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('TLS peer DN="/CN=localhost"');
  });

  it('AUTH before STARTTLS is refused with 530 5.7.0 before any credential is sent', async () => {
    const c = await RawClient.connect(s.smtp.port);
    await c.cmd('EHLO client.test');
    expect(await c.cmd('AUTH LOGIN')).toBe('530 5.7.0 Must issue a STARTTLS command first');
    expect(await c.authPlain(s.cred.username, s.cred.password)).toBe('530 5.7.0 Must issue a STARTTLS command first');
    c.destroy();
    // swaks without -tls gets the same answer.
    const r = await swaks([
      '--server',
      '127.0.0.1',
      '--port',
      String(s.smtp.port),
      '--auth',
      'LOGIN',
      '--auth-user',
      s.cred.username,
      '--auth-password',
      s.cred.password,
      '--quit-after',
      'AUTH',
    ]);
    expect(r.out).toContain('530 5.7.0 Must issue a STARTTLS command first');
  });

  it('MAIL before AUTH is refused with 530 5.7.0', async () => {
    const c = await RawClient.connect(s.smtp.port);
    await c.cmd('EHLO client.test');
    await c.starttls();
    await c.cmd('EHLO client.test');
    expect(await c.cmd('MAIL FROM:<shop@example.com>')).toBe('530 5.7.0 Authentication required');
    c.destroy();
  });

  it('bad password or unknown user: 535 5.7.8 at AUTH time (LOGIN and PLAIN, nodemailer and swaks)', async () => {
    const bad = { ...s.cred, password: 'wrong-password' };
    for (const method of ['LOGIN', 'PLAIN'] as const) {
      const err = await mailer(s.smtp.port, bad, method)
        .sendMail({ from: 'shop@example.com', to: 'a@example.com', text: 'x' })
        .catch((e: { response?: string; command?: string }) => e);
      expect((err as { response?: string }).response).toBe('535 5.7.8 Authentication credentials invalid');
      expect((err as { command?: string }).command).toMatch(/^AUTH|^PLAIN|LOGIN/);
      const r = await swaks([
        ...swaksAuth(s.smtp.port, { ...s.cred, username: 'smtp_nobody' }, method),
        '--quit-after',
        'AUTH',
      ]);
      expect(r.out).toContain('<~* 535 5.7.8 Authentication credentials invalid');
    }
  });

  it('the third failed AUTH on one connection closes it (each costs an scrypt hash)', async () => {
    const c = await RawClient.connect(s.smtp.port);
    await c.cmd('EHLO client.test');
    await c.starttls();
    await c.cmd('EHLO client.test');
    expect(await c.authPlain(s.cred.username, 'x')).toBe('535 5.7.8 Authentication credentials invalid');
    expect(await c.authPlain(s.cred.username, 'y')).toBe('535 5.7.8 Authentication credentials invalid');
    expect(await c.authPlain(s.cred.username, 'z')).toBe(
      '421 4.7.0 Too many failed authentication attempts, closing connection',
    );
    expect(await c.waitClosed()).toBe(true);
  });

  it('a deleted credential fails AUTH, and stops working on connections already open', async () => {
    const cred = await newCredential(s.ctx, s.tenant.tenantId, 'to delete');
    const open = await RawClient.ready(s.smtp.port, cred);
    expect(queuedId(await sendRaw(open, ['a@example.com'], message()))).toBeTruthy();

    const del = await call(s.ctx.app, 'DELETE', `/v1/smtp-credentials/${cred.id}`, { key: s.tenant.apiKey });
    expect(del.statusCode).toBe(204);

    expect(await open.cmd('MAIL FROM:<shop@example.com>')).toBe(
      '421 4.7.0 This SMTP credential was deleted, closing connection',
    );
    expect(await open.waitClosed()).toBe(true);
    const err = await mailer(s.smtp.port, cred)
      .sendMail({ from: 'shop@example.com', to: 'a@example.com', text: 'x' })
      .catch((e: { response?: string }) => e);
    expect((err as { response?: string }).response).toBe('535 5.7.8 Authentication credentials invalid');
  });

  it('a credential only ever sends for its own tenant', async () => {
    const other = await s.ctx.c.tenants.create({ name: 'Other', from: 'o@example.org' });
    const cred = await newCredential(s.ctx, other.tenant_id, 'other');
    const info = await mailer(s.smtp.port, cred).sendMail({
      from: 'o@example.org',
      to: 'x@example.com',
      subject: 's',
      text: 'x',
    });
    const row = await s.ctx.c.database.db
      .selectFrom('transmissions')
      .select('tenant_id')
      .where('id', '=', queuedId(info.response))
      .executeTakeFirstOrThrow();
    expect(row.tenant_id).toBe(other.tenant_id);
  });
});

describe('production mode: configured certificate, implicit TLS, sender-domain policy', () => {
  let s: SmtpSetup;
  let dns: DnsServer;
  const from = 'Shop <hello@shop.example.test>';
  beforeAll(async () => {
    dns = await startDnsServer();
    s = await setupSmtp(
      {
        POSTYARD_DEV_MODE: 'false',
        POSTYARD_SMTP_TLS_CERT: join(CERTS, 'sink-cert.pem'),
        POSTYARD_SMTP_TLS_KEY: join(CERTS, 'sink-key.pem'),
        POSTYARD_DNS_SERVERS: dns.address,
        POSTYARD_BOUNCE_HOST: BOUNCE_HOST,
      },
      { smtpsPort: 0 },
    );
  });
  afterAll(async () => {
    await s?.close();
    await dns?.close();
  });

  it('an unverified From domain is refused with 550 5.7.1; once verified the same mail is queued', async () => {
    const c = await RawClient.ready(s.smtp.port, s.cred);
    const data = message({ from });
    expect(await sendRaw(c, ['a@example.com'], data)).toMatch(/^550 5\.7\.1 .*shop\.example\.test/);
    const d = await addDomain(s.ctx, s.tenant.apiKey, 'shop.example.test');
    publish(dns, d);
    expect((await verifyDomain(s.ctx, s.tenant.apiKey, d.id)).status).toBe('verified');
    expect(queuedId(await sendRaw(c, ['a@example.com'], data))).toBeTruthy();
    c.destroy();
  });

  it('STARTTLS presents the configured certificate', async () => {
    const r = await swaks([
      ...swaksAuth(s.smtp.port, s.cred, 'PLAIN'),
      '--from',
      'hello@shop.example.test',
      '--to',
      'a@example.com',
      '--header',
      `From: ${from}`,
    ]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/TLS peer DN=.*CN=localhost/);
    expect(r.out).toMatch(/<~ {2}250 2\.0\.0 Ok: queued as /);
  });

  it('implicit TLS port: AUTH at once, no STARTTLS offered', async () => {
    expect(s.smtp.smtpsPort).toBeGreaterThan(0);
    const c = await RawClient.connect(s.smtp.smtpsPort as number, true);
    const ehlo = await c.cmd('EHLO client.test');
    expect(ehlo).not.toContain('STARTTLS');
    expect(await c.authPlain(s.cred.username, s.cred.password)).toBe('235 2.7.0 Authentication successful');
    expect(queuedId(await sendRaw(c, ['b@example.com'], message({ from })))).toBeTruthy();
    c.destroy();
    const info = await mailer(s.smtp.smtpsPort as number, s.cred, 'LOGIN', {
      secure: true,
      requireTLS: false,
    }).sendMail({
      from,
      to: 'c@example.com',
      subject: 'implicit',
      text: 'x',
    });
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as /);
  });
});

describe('no certificate outside development mode', () => {
  it('offers no STARTTLS and refuses AUTH, unless cleartext AUTH is allowed', async () => {
    const strict = await setupSmtp({ POSTYARD_DEV_MODE: 'false' });
    try {
      const c = await RawClient.connect(strict.smtp.port);
      expect(await c.cmd('EHLO client.test')).not.toContain('STARTTLS');
      expect(await c.authPlain(strict.cred.username, strict.cred.password)).toBe(
        '530 5.7.0 Authentication requires TLS, which this server does not offer',
      );
      c.destroy();
    } finally {
      await strict.close();
    }

    const lax = await setupSmtp({ POSTYARD_DEV_MODE: 'false', POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true' });
    try {
      const c = await RawClient.connect(lax.smtp.port);
      await c.cmd('EHLO client.test');
      expect(await c.authPlain(lax.cred.username, lax.cred.password)).toBe('235 2.7.0 Authentication successful');
      expect(await c.cmd('MAIL FROM:<shop@example.com>')).toBe('250 2.1.0 Accepted');
      c.destroy();
    } finally {
      await lax.close();
    }
  });

  it('POSTYARD_SMTP_ALLOW_INSECURE_AUTH also allows AUTH before STARTTLS when TLS is offered', async () => {
    const s = await setupSmtp({ POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true' });
    try {
      const c = await RawClient.connect(s.smtp.port);
      expect(await c.cmd('EHLO client.test')).toContain('STARTTLS');
      expect(await c.authPlain(s.cred.username, s.cred.password)).toBe('235 2.7.0 Authentication successful');
      c.destroy();
    } finally {
      await s.close();
    }
  });
});
