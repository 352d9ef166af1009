/**
 * Shared setup for the SMTP submission tests: a test context (own database, SQLite or the
 * PostgreSQL of TEST_DATABASE_URL), a tenant with one SMTP credential, and the submission
 * server on a free port of 127.0.0.1. Clients are real: nodemailer, swaks, and a raw line
 * client for exact reply codes.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import tls from 'node:tls';
import nodemailer from 'nodemailer';
import { type RunningSmtpServer, startSmtpServer } from '../../src/smtp/server.ts';
import { createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

export interface Credential {
  id: string;
  username: string;
  password: string;
}

export interface SmtpSetup {
  ctx: TestContext;
  tenant: TestTenant;
  cred: Credential;
  smtp: RunningSmtpServer;
  close(): Promise<void>;
}

export async function setupSmtp(
  env: Record<string, string> = {},
  opts: { smtpsPort?: number | null } = {},
): Promise<SmtpSetup> {
  const ctx = await createTestContext({ env });
  const tenant = await createTenant(ctx, 'Shop <shop@example.com>');
  const cred = await newCredential(ctx, tenant.tenantId);
  const smtp = await startSmtpServer(ctx.c, { port: 0, host: '127.0.0.1', ...opts });
  return {
    ctx,
    tenant,
    cred,
    smtp,
    async close() {
      await smtp.close();
      await ctx.close();
    },
  };
}

export async function newCredential(ctx: TestContext, tenantId: string, name = 'app'): Promise<Credential> {
  const c = await ctx.c.smtpCredentials.create(tenantId, { name });
  return { id: c.id, username: c.username, password: c.password };
}

/** nodemailer over STARTTLS (required) with the given AUTH method; the dev certificate is self-signed. */
export function mailer(
  port: number,
  cred: Credential,
  method: 'LOGIN' | 'PLAIN' = 'LOGIN',
  extra: Record<string, unknown> = {},
) {
  return nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    requireTLS: true,
    auth: { user: cred.username, pass: cred.password, method },
    tls: { rejectUnauthorized: false },
    ...extra,
  });
}

export interface SwaksResult {
  code: number;
  out: string;
}

/** Runs swaks (asynchronously: the server under test lives in this process). */
export function swaks(args: string[]): Promise<SwaksResult> {
  return new Promise((resolve) => {
    execFile('swaks', ['--timeout', '10', ...args], { encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

export function swaksAuth(port: number, cred: Credential, method: 'LOGIN' | 'PLAIN'): string[] {
  return [
    '--server',
    '127.0.0.1',
    '--port',
    String(port),
    '-tls',
    '--auth',
    method,
    '--auth-user',
    cred.username,
    '--auth-password',
    cred.password,
  ];
}

/** A line-level SMTP client: send exact commands, read exact replies. */
export class RawClient {
  private buf = '';
  private waiters: (() => void)[] = [];
  closed = false;
  /** The first line the server sent (220 greeting, or a 421 refusal). */
  greeting = '';
  private closedPromise: Promise<void>;

  private constructor(private socket: net.Socket | tls.TLSSocket) {
    this.closedPromise = new Promise((resolve) => {
      this.attach(socket, resolve);
    });
  }

  private attach(socket: net.Socket | tls.TLSSocket, onClose: () => void) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.buf += d;
      this.wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.wake();
      onClose();
    });
  }

  private wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  static async connect(port: number, secure = false): Promise<RawClient> {
    const socket = secure
      ? tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false })
      : net.connect({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => {
      socket.once(secure ? 'secureConnect' : 'connect', () => resolve());
      socket.once('error', reject);
    });
    return RawClient.over(socket);
  }

  /** A client on a socket already connected (e.g. one that sent a PROXY header); reads the greeting. */
  static async over(socket: net.Socket | tls.TLSSocket): Promise<RawClient> {
    const c = new RawClient(socket);
    c.greeting = await c.read();
    return c;
  }

  /** The next complete reply (all lines of a multi-line one), or '' when the server closed. */
  async read(timeoutMs = 10_000): Promise<string> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const lines = this.buf.split('\r\n');
      for (let i = 0; i < lines.length - 1; i++) {
        if (/^\d{3} /.test(lines[i] ?? '') || /^\d{3}$/.test(lines[i] ?? '')) {
          const reply = lines.slice(0, i + 1).join('\n');
          this.buf = lines.slice(i + 1).join('\r\n');
          return reply;
        }
      }
      if (this.closed) return '';
      if (Date.now() > end) throw new Error(`no reply within ${timeoutMs} ms; buffer: ${JSON.stringify(this.buf)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  write(data: string | Buffer) {
    this.socket.write(data);
  }

  async cmd(line: string, timeoutMs?: number): Promise<string> {
    this.socket.write(`${line}\r\n`);
    return this.read(timeoutMs);
  }

  async starttls(): Promise<void> {
    const r = await this.cmd('STARTTLS');
    if (!r.startsWith('220')) throw new Error(`STARTTLS refused: ${r}`);
    const plain = this.socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('close');
    const secure = tls.connect({ socket: plain as net.Socket, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', () => resolve());
      secure.once('error', reject);
    });
    this.socket = secure;
    this.attach(secure, () => {});
    this.closedPromise = new Promise((resolve) => secure.once('close', () => resolve()));
  }

  async authPlain(username: string, password: string): Promise<string> {
    return this.cmd(`AUTH PLAIN ${Buffer.from(`\0${username}\0${password}`).toString('base64')}`);
  }

  /** EHLO, STARTTLS, EHLO, AUTH PLAIN: a session ready for MAIL. */
  static async ready(port: number, cred: Credential): Promise<RawClient> {
    const c = await RawClient.connect(port);
    await c.cmd('EHLO client.test');
    await c.starttls();
    await c.cmd('EHLO client.test');
    const r = await c.authPlain(cred.username, cred.password);
    if (!r.startsWith('235')) throw new Error(`AUTH failed: ${r}`);
    return c;
  }

  /** Resolves true when the server closed the connection within `ms`. */
  async waitClosed(ms = 10_000): Promise<boolean> {
    if (this.closed) return true;
    return Promise.race([
      this.closedPromise.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), ms)),
    ]);
  }

  destroy() {
    this.socket.destroy();
  }
}

export function message(
  opts: { from?: string; to?: string; subject?: string; headers?: string[]; body?: string } = {},
): string {
  const lines = [
    `From: ${opts.from ?? 'Shop <shop@example.com>'}`,
    `To: ${opts.to ?? 'ann@example.com'}`,
    `Subject: ${opts.subject ?? 'Hello'}`,
    ...(opts.headers ?? []),
    '',
    opts.body ?? 'Hi there.',
  ];
  return `${lines.join('\r\n')}\r\n`;
}

/** MAIL, RCPTs, DATA and the message on a ready session; returns the final reply. */
export async function sendRaw(c: RawClient, rcpts: string[], data: string, from = 'shop@example.com'): Promise<string> {
  const m = await c.cmd(`MAIL FROM:<${from}>`);
  if (!m.startsWith('250')) return m;
  for (const r of rcpts) {
    const res = await c.cmd(`RCPT TO:<${r}>`);
    if (!res.startsWith('250')) return res;
  }
  const d = await c.cmd('DATA');
  if (!d.startsWith('354')) return d;
  const stuffed = data.replace(/^\./gm, '..');
  return c.cmd(`${stuffed.endsWith('\r\n') ? stuffed : `${stuffed}\r\n`}.`);
}

export function queuedId(reply: string): string {
  const m = /^250 2\.0\.0 Ok: queued as ([0-9a-f-]{36})$/m.exec(reply);
  if (!m?.[1]) throw new Error(`not a queued reply: ${reply}`);
  return m[1];
}

export async function transmissionRows(ctx: TestContext, tenantId: string) {
  return ctx.c.database.db
    .selectFrom('transmissions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .orderBy('id')
    .execute();
}

export async function messageRows(ctx: TestContext, transmissionId: string) {
  return ctx.c.database.db
    .selectFrom('messages')
    .selectAll()
    .where('transmission_id', '=', transmissionId)
    .orderBy('recipient')
    .execute();
}

export function rawOf(row: { raw_message: string | null }): string {
  return Buffer.from(row.raw_message ?? '', 'base64').toString('utf8');
}

/** Polls `check` until it holds (or throws after `ms`). */
export async function until(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
