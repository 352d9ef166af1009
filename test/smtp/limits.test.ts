/**
 * Limits of the submission server, each answered with its proper code (docs/smtp.md "Limits"):
 * size 552 5.3.4, recipients 452 4.5.3, connections per IP and per credential 421 4.7.0,
 * messages per credential 451 4.7.1; garbage commands, huge lines, idle and slow-drip clients
 * are disconnected with 421 while other clients carry on; a graceful stop lets DATA finish.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  mailer,
  message,
  messageRows,
  newCredential,
  queuedId,
  RawClient,
  type SmtpSetup,
  sendRaw,
  setupSmtp,
  sleep,
  transmissionRows,
  until,
} from './helpers.ts';

describe('size, recipients, connections, rate', () => {
  let s: SmtpSetup;
  beforeAll(async () => {
    s = await setupSmtp({
      POSTYARD_SMTP_MAX_MESSAGE_MB: '1',
      POSTYARD_SMTP_MAX_RECIPIENTS: '3',
      POSTYARD_SMTP_MESSAGES_PER_MINUTE: '5',
      POSTYARD_SMTP_MAX_CONNECTIONS_PER_CREDENTIAL: '2',
      POSTYARD_SMTP_MAX_CONNECTIONS_PER_IP: '4',
    });
  });
  afterAll(async () => {
    await s?.close();
  });
  const idle = () => until(() => s.smtp.limits.connectionsFrom('127.0.0.1') === 0);

  it('message size: SIZE advertised, declared and actual oversize refused with 552 5.3.4, nothing stored', async () => {
    const c = await RawClient.ready(s.smtp.port, await newCredential(s.ctx, s.tenant.tenantId));
    expect(await c.cmd('MAIL FROM:<shop@example.com> SIZE=2000000')).toMatch(/^552 5\.3\.4 /);
    const before = (await transmissionRows(s.ctx, s.tenant.tenantId)).length;
    const big = message({ body: `${'x'.repeat(998)}\r\n`.repeat(1100) });
    expect(await sendRaw(c, ['a@example.com'], big)).toBe('552 5.3.4 Message size exceeds the limit of 1048576 bytes');
    expect((await transmissionRows(s.ctx, s.tenant.tenantId)).length).toBe(before);
    // The session is still usable afterwards.
    expect(queuedId(await sendRaw(c, ['a@example.com'], message()))).toBeTruthy();
    c.destroy();
    await idle();
  });

  it('too many recipients: 452 4.5.3 per extra RCPT; the message goes to the accepted ones', async () => {
    const c = await RawClient.ready(s.smtp.port, await newCredential(s.ctx, s.tenant.tenantId));
    expect(await c.cmd('MAIL FROM:<shop@example.com>')).toMatch(/^250 /);
    for (const r of ['a@example.com', 'b@example.com', 'c@example.com'])
      expect(await c.cmd(`RCPT TO:<${r}>`)).toMatch(/^250 /);
    expect(await c.cmd('RCPT TO:<d@example.com>')).toBe('452 4.5.3 Error: too many recipients');
    expect(await c.cmd('DATA')).toMatch(/^354 /);
    const id = queuedId(await c.cmd(`${message()}.`));
    expect((await messageRows(s.ctx, id)).map((m) => m.recipient)).toEqual([
      'a@example.com',
      'b@example.com',
      'c@example.com',
    ]);
    // nodemailer reports the refused recipient and still sends to the others.
    const info = await mailer(s.smtp.port, await newCredential(s.ctx, s.tenant.tenantId)).sendMail({
      from: 'shop@example.com',
      to: ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com'],
      text: 'x',
    });
    expect(info.rejected).toEqual(['d@example.com']);
    const rejectedErrors = (info as { rejectedErrors?: { response?: string }[] }).rejectedErrors;
    expect(rejectedErrors?.[0]?.response).toBe('452 4.5.3 Error: too many recipients');
    c.destroy();
    await idle();
  });

  it('messages per credential per minute: 451 4.7.1 at MAIL once the budget is spent; other credentials unaffected', async () => {
    const cred = await newCredential(s.ctx, s.tenant.tenantId, 'rated');
    const c = await RawClient.ready(s.smtp.port, cred);
    for (let i = 0; i < 5; i++) expect(queuedId(await sendRaw(c, ['a@example.com'], message()))).toBeTruthy();
    expect(await c.cmd('MAIL FROM:<shop@example.com>')).toMatch(
      /^451 4\.7\.1 Rate limit of 5 messages per minute for this SMTP credential exceeded, try again in \d+ s$/,
    );
    const other = await RawClient.ready(s.smtp.port, await newCredential(s.ctx, s.tenant.tenantId));
    expect(queuedId(await sendRaw(other, ['a@example.com'], message()))).toBeTruthy();
    c.destroy();
    other.destroy();
    await idle();
  });

  it('connections per credential: the extra one is refused at AUTH with 421 4.7.0', async () => {
    const cred = await newCredential(s.ctx, s.tenant.tenantId, 'pooled');
    const a = await RawClient.ready(s.smtp.port, cred);
    const b = await RawClient.ready(s.smtp.port, cred);
    const c = await RawClient.connect(s.smtp.port);
    await c.cmd('EHLO client.test');
    await c.starttls();
    await c.cmd('EHLO client.test');
    expect(await c.authPlain(cred.username, cred.password)).toBe(
      '421 4.7.0 Too many connections for this SMTP credential (limit 2), try again later',
    );
    expect(await c.waitClosed()).toBe(true);
    a.destroy();
    await until(() => s.smtp.limits.connectionsFrom('127.0.0.1') === 1);
    const d = await RawClient.ready(s.smtp.port, cred); // a slot is free again
    b.destroy();
    d.destroy();
    await idle();
  });

  it('connections per client IP: the extra one is refused at once with 421 4.7.0', async () => {
    const open = await Promise.all(Array.from({ length: 4 }, () => RawClient.connect(s.smtp.port)));
    expect(open.every((c) => c.greeting.startsWith('220 '))).toBe(true);
    const extra = await RawClient.connect(s.smtp.port);
    expect(extra.greeting).toBe('421 4.7.0 Too many connections from 127.0.0.1 (limit 4), try again later');
    expect(await extra.waitClosed()).toBe(true);
    for (const c of open) c.destroy();
    await idle();
    const again = await RawClient.connect(s.smtp.port);
    expect(again.greeting).toMatch(/^220 /);
    again.destroy();
    await idle();
  });

  it('garbage commands: disconnected with 421 after 10 unrecognized commands', async () => {
    const c = await RawClient.connect(s.smtp.port);
    const replies: string[] = [];
    for (let i = 0; i < 10; i++) replies.push(await c.cmd(`XYZZY${i} garbage`));
    expect(replies.slice(0, 9).every((r) => r.startsWith('500 5.5.2 '))).toBe(true);
    expect(replies[9]).toBe('421 4.4.2 Error: too many unrecognized commands');
    expect(await c.waitClosed()).toBe(true);
    await idle();
  });

  it('a huge command line: disconnected with 421, nothing buffered beyond the limit', async () => {
    const c = await RawClient.connect(s.smtp.port);
    c.write(`EHLO ${'a'.repeat(64 * 1024)}`);
    expect(await c.read()).toMatch(/^421 4\.4\.2 Error: Command line too long/);
    expect(await c.waitClosed()).toBe(true);
    await idle();
  });
});

describe('idle clients', () => {
  it('idle timeout: 421 4.4.2 and disconnect', async () => {
    const s = await setupSmtp({ POSTYARD_SMTP_IDLE_TIMEOUT_SECONDS: '1' });
    try {
      const c = await RawClient.connect(s.smtp.port);
      const t0 = Date.now();
      expect(await c.read(10_000)).toBe('421 4.4.2 Timeout - closing connection');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(800);
      expect(await c.waitClosed()).toBe(true);
    } finally {
      await s.close();
    }
  });
});

describe('slow clients', () => {
  let s: SmtpSetup;
  beforeAll(async () => {
    // The idle timeout is well above the drip interval, so only the deadline can cut the drip.
    s = await setupSmtp({ POSTYARD_SMTP_IDLE_TIMEOUT_SECONDS: '5', POSTYARD_SMTP_COMMAND_DEADLINE_SECONDS: '2' });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('slow drip (a byte every 250 ms, never finishing): cut by the progress deadline, others unaffected', async () => {
    const drip = await RawClient.connect(s.smtp.port);
    const inData = await RawClient.ready(s.smtp.port, s.cred);
    expect(await inData.cmd('MAIL FROM:<shop@example.com>')).toMatch(/^250 /);
    expect(await inData.cmd('RCPT TO:<a@example.com>')).toMatch(/^250 /);
    expect(await inData.cmd('DATA')).toMatch(/^354 /);
    const started = Date.now();
    const timer = setInterval(() => {
      drip.write('E');
      inData.write('x');
    }, 250);
    try {
      // While both drip, a well-behaved client is served normally.
      const t = mailer(s.smtp.port, s.cred);
      const info = await t.sendMail({ from: 'shop@example.com', to: 'b@example.com', subject: 'fine', text: 'x' });
      t.close();
      expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as /);

      const [a, b] = await Promise.all([drip.read(8000), inData.read(8000)]);
      for (const r of [a, b])
        expect(r).toBe('421 4.4.2 Too slow: command or message not completed in time, closing connection');
      expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
      expect(await drip.waitClosed()).toBe(true);
      expect(await inData.waitClosed()).toBe(true);
    } finally {
      clearInterval(timer);
    }
  });
});

describe('graceful stop', () => {
  it('in-flight DATA is answered 250, idle sessions get 421 4.3.2, new connections are refused', async () => {
    const s = await setupSmtp();
    try {
      const busy = await RawClient.ready(s.smtp.port, s.cred);
      const idleClient = await RawClient.ready(s.smtp.port, s.cred);
      expect(await busy.cmd('MAIL FROM:<shop@example.com>')).toMatch(/^250 /);
      expect(await busy.cmd('RCPT TO:<a@example.com>')).toMatch(/^250 /);
      expect(await busy.cmd('DATA')).toMatch(/^354 /);
      busy.write(message().slice(0, 40));

      const closing = s.smtp.close();
      expect(await idleClient.read()).toBe('421 4.3.2 Server shutting down, try again later');
      await sleep(200);
      const refused = await new Promise<boolean>((resolve) => {
        const sock = net.connect({ host: '127.0.0.1', port: s.smtp.port });
        sock.on('error', () => resolve(true));
        sock.on('connect', () => {
          sock.destroy();
          resolve(false);
        });
      });
      expect(refused).toBe(true);

      const reply = await busy.cmd(`${message().slice(40)}.`);
      expect(queuedId(reply)).toBeTruthy();
      expect(await busy.read()).toBe('421 4.3.2 Server shutting down, try again later');
      await closing;
      expect(await busy.waitClosed()).toBe(true);
      expect((await transmissionRows(s.ctx, s.tenant.tenantId)).length).toBe(1);
    } finally {
      await s.close();
    }
  });
});
