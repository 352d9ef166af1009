/**
 * SMTP submission -> transmission (docs/smtp.md): real clients (nodemailer, swaks) over
 * STARTTLS with AUTH LOGIN and PLAIN; one transmission per message with one message row per
 * RCPT; Bcc and X-Postyard-Options never stored; options, idempotency, suppressions, events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/context.ts';
import {
  message,
  messageRows,
  mailer,
  queuedId,
  RawClient,
  rawOf,
  type SmtpSetup,
  sendRaw,
  setupSmtp,
  swaks,
  swaksAuth,
  transmissionRows,
} from './helpers.ts';

let s: SmtpSetup;

beforeAll(async () => {
  s = await setupSmtp();
});
afterAll(async () => {
  await s?.close();
});

async function transmission(id: string) {
  const row = await s.ctx.c.database.db
    .selectFrom('transmissions')
    .selectAll()
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return { ...row, raw: rawOf(row) };
}

describe('nodemailer over STARTTLS', () => {
  for (const method of ['LOGIN', 'PLAIN'] as const) {
    it(`AUTH ${method}: one transmission, one message row per RCPT, 250 names the transmission`, async () => {
      const t = mailer(s.smtp.port, s.cred, method);
      const info = await t.sendMail({
        from: 'Shop <shop@example.com>',
        to: ['ann@example.com', 'bob@example.com'],
        cc: 'carl@example.com',
        bcc: 'secret@example.com',
        subject: `Receipt via ${method}`,
        text: 'Thanks for your order.',
        html: '<p>Thanks for your order.</p>',
        headers: { 'X-Postyard-Options': '{"tags":["receipt"],"metadata":{"order":"42"},"mail_type":"transactional"}' },
      });
      t.close();
      expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as [0-9a-f-]{36}$/);
      const id = queuedId(info.response);
      const tx = await transmission(id);
      expect(tx.tenant_id).toBe(s.tenant.tenantId);
      expect(tx.source).toBe('smtp');
      expect(JSON.parse(tx.tags)).toEqual(['receipt']);
      expect(JSON.parse(tx.metadata)).toEqual({ order: '42' });
      expect(tx.total_accepted).toBe(4);
      const content = JSON.parse(tx.content);
      expect(content).toMatchObject({ subject: `Receipt via ${method}`, from: 'Shop <shop@example.com>' });

      const msgs = await messageRows(s.ctx, id);
      expect(msgs.map((m) => m.recipient)).toEqual([
        'ann@example.com',
        'bob@example.com',
        'carl@example.com',
        'secret@example.com',
      ]);
      expect(msgs.every((m) => m.state === 'queued')).toBe(true);
      expect(msgs.map((m) => JSON.parse(m.metadata ?? '{}'))).toEqual(Array(4).fill({ order: '42' }));

      // The stored message keeps its MIME but has no Bcc and no X-Postyard-Options.
      expect(tx.raw).not.toMatch(/^bcc:/im);
      expect(tx.raw).not.toContain('secret@example.com');
      expect(tx.raw).not.toMatch(/^x-postyard-options:/im);
      expect(tx.raw).toMatch(/^Content-Type: multipart\/alternative/im);
      expect(tx.raw).toContain('<p>Thanks for your order.</p>');
      expect(tx.raw).toMatch(/^Cc: carl@example\.com\r$/m);

      const events = await s.ctx.c.database.db
        .selectFrom('events')
        .selectAll()
        .where('transmission_id', '=', id)
        .execute();
      expect(events.map((e) => e.type).sort()).toEqual(Array(4).fill('message.accepted'));
      expect(JSON.parse(events[0]?.tags ?? '[]')).toEqual(['receipt']);
    });
  }

  it('the transmission is readable through the API like any other', async () => {
    const t = mailer(s.smtp.port, s.cred);
    const info = await t.sendMail({ from: 'shop@example.com', to: 'dora@example.com', subject: 'Via API', text: 'x' });
    t.close();
    const res = await call(s.ctx.app, 'GET', `/v1/transmissions/${queuedId(info.response)}`, { key: s.tenant.apiKey });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      source: 'smtp',
      content: { subject: 'Via API', from: 'shop@example.com' },
      total_accepted_recipients: 1,
    });
  });

  it('X-Postyard-Options idempotency_key: the same message twice is one transmission', async () => {
    const before = (await transmissionRows(s.ctx, s.tenant.tenantId)).length;
    const t = mailer(s.smtp.port, s.cred);
    const mail = {
      from: 'shop@example.com',
      to: 'eve@example.com',
      subject: 'Once only',
      text: 'Exactly once.',
      headers: { 'X-Postyard-Options': JSON.stringify({ idempotency_key: 'order-42-receipt' }) },
    };
    // nodemailer builds a fresh Message-ID and Date per sendMail: still the same request.
    const a = await t.sendMail(mail);
    const b = await t.sendMail(mail);
    expect(queuedId(b.response)).toBe(queuedId(a.response));
    expect((await transmissionRows(s.ctx, s.tenant.tenantId)).length).toBe(before + 1);

    // Same key, different message: refused permanently, nothing stored.
    const err = await t.sendMail({ ...mail, text: 'Something else.' }).catch((e: { response: string }) => e);
    t.close();
    expect((err as { response: string }).response).toMatch(
      /^550 5\.6\.0 X-Postyard-Options: this idempotency_key was already used for a different message/,
    );
    expect((await transmissionRows(s.ctx, s.tenant.tenantId)).length).toBe(before + 1);
  });
});

describe('swaks over STARTTLS', () => {
  for (const method of ['LOGIN', 'PLAIN'] as const) {
    it(`AUTH ${method}`, async () => {
      const r = await swaks([
        ...swaksAuth(s.smtp.port, s.cred, method),
        '--from',
        'shop@example.com',
        '--to',
        'fay@example.com,gus@example.com',
        '--header',
        'From: Shop <shop@example.com>',
        '--header',
        `Subject: swaks ${method}`,
        '--header',
        'Bcc: hidden@example.com',
        '--header',
        'X-Postyard-Options: {"tags":["swaks"],"metadata":{},"mail_type":"marketing","idempotency_key":""}',
        '--body',
        'Hello from swaks.',
      ]);
      expect(r.code, r.out).toBe(0);
      expect(r.out).toMatch(/<- {2}220 2\.0\.0 Ready to start TLS/);
      expect(r.out).toContain('<~  235 2.7.0 Authentication successful');
      const id = /<~ {2}250 2\.0\.0 Ok: queued as ([0-9a-f-]{36})/.exec(r.out)?.[1] ?? '';
      const tx = await transmission(id);
      expect(tx.mail_type).toBe('marketing');
      expect(JSON.parse(tx.tags)).toEqual(['swaks']);
      expect(tx.raw).not.toMatch(/^(bcc|x-postyard-options):/im);
      expect(tx.raw).toContain('Hello from swaks.');
      expect((await messageRows(s.ctx, id)).map((m) => m.recipient)).toEqual(['fay@example.com', 'gus@example.com']);
    });
  }
});

describe('message handling', () => {
  let c: RawClient;
  beforeAll(async () => {
    c = await RawClient.ready(s.smtp.port, s.cred);
  });
  afterAll(() => c?.destroy());

  it('folded X-Postyard-Options and Bcc fields are removed whole; other bytes stay as sent', async () => {
    const data = message({
      headers: [
        'Bcc: a-very-long-list@example.com,',
        '\tanother@example.com',
        'X-Postyard-Options: {"tags":["folded"],',
        ' "metadata":{"k":"v"}}',
        'X-Keep: kept value',
      ],
      body: 'Body line\r\n.leading dot',
    });
    const r = await sendRaw(c, ['hank@example.com'], data);
    const tx = await transmission(queuedId(r));
    expect(JSON.parse(tx.tags)).toEqual(['folded']);
    expect(JSON.parse(tx.metadata)).toEqual({ k: 'v' });
    expect(tx.raw).not.toContain('another@example.com');
    expect(tx.raw).not.toContain('metadata');
    expect(
      tx.raw.startsWith(
        'From: Shop <shop@example.com>\r\nTo: ann@example.com\r\nSubject: Hello\r\nX-Keep: kept value\r\n',
      ),
    ).toBe(true);
    expect(tx.raw).toContain('\r\n\r\nBody line\r\n.leading dot\r\n');
  });

  it('adds Date and Message-ID when the client sent none (RFC 6409)', async () => {
    const tx = await transmission(queuedId(await sendRaw(c, ['ida@example.com'], message())));
    expect(tx.raw).toMatch(/^Date: \w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000\r$/m);
    expect(tx.raw).toMatch(/^Message-ID: <[0-9a-f-]{36}@example\.com>\r$/m);
  });

  it('decodes encoded-word From names and subjects', async () => {
    const data = message({
      from: '=?UTF-8?B?w4RrbWUgU2hvcA==?= <shop@example.com>',
      subject: '=?UTF-8?Q?Gr=C3=BC=C3=9Fe?=',
    });
    const tx = await transmission(queuedId(await sendRaw(c, ['jo@example.com'], data)));
    expect(JSON.parse(tx.content)).toMatchObject({ from: '"Äkme Shop" <shop@example.com>', subject: 'Grüße' });
  });

  it('a suppressed recipient is still accepted (reported as suppressed, like the API)', async () => {
    const sup = await call(s.ctx.app, 'POST', '/v1/suppressions', {
      key: s.tenant.apiKey,
      body: { items: [{ identifier: 'gone@example.com', type: 'email', reason_category: 'hard_bounce' }] },
    });
    expect(sup.statusCode, sup.body).toBe(200);
    const id = queuedId(await sendRaw(c, ['gone@example.com', 'kim@example.com'], message()));
    const msgs = await messageRows(s.ctx, id);
    expect(msgs.map((m) => [m.recipient, m.state])).toEqual([
      ['gone@example.com', 'suppressed'],
      ['kim@example.com', 'queued'],
    ]);
    const events = await s.ctx.c.database.db
      .selectFrom('events')
      .select('type')
      .where('transmission_id', '=', id)
      .execute();
    expect(events.map((e) => e.type).sort()).toEqual(['message.accepted', 'message.suppressed']);
  });

  it('refuses bad messages with 5xx and stores nothing', async () => {
    const before = (await transmissionRows(s.ctx, s.tenant.tenantId)).length;
    const cases: [string, RegExp][] = [
      [message({ headers: ['X-Postyard-Options: {not json'] }), /^550 5\.6\.0 X-Postyard-Options: not valid JSON/],
      [
        message({ headers: ['X-Postyard-Options: {"colour":"red"}'] }),
        /^550 5\.6\.0 X-Postyard-Options: unknown field "colour"/,
      ],
      [
        message({ headers: ['X-Postyard-Options: {"tags":"x"}'] }),
        /^550 5\.6\.0 X-Postyard-Options: tags must be an array/,
      ],
      [
        message({ headers: ['X-Postyard-Options: {"mail_type":"bulk"}'] }),
        /^550 5\.6\.0 X-Postyard-Options: mail_type/,
      ],
      [
        message({
          headers: [`X-Postyard-Options: {"tags":${JSON.stringify(Array.from({ length: 11 }, (_, i) => `t${i}`))}}`],
        }),
        /^550 5\.6\.0 .*at most 10 tags/,
      ],
      ['To: ann@example.com\r\nSubject: x\r\n\r\nno from\r\n', /^550 5\.6\.0 The message has no From header/],
      [message({ from: 'not an address' }), /^553 5\.1\.7 /],
      [
        'From ann@example.com Sat Jan  3 01:05:34 1996\r\nFrom: a@example.com\r\n\r\nx\r\n',
        /^550 5\.6\.0 Malformed message/,
      ],
    ];
    for (const [data, expected] of cases) {
      expect(await sendRaw(c, ['lee@example.com'], data)).toMatch(expected);
    }
    expect((await transmissionRows(s.ctx, s.tenant.tenantId)).length).toBe(before);
  });

  it('refuses a malformed recipient address with 553 5.1.3 at RCPT', async () => {
    expect(await c.cmd('MAIL FROM:<shop@example.com>')).toMatch(/^250 /);
    expect(await c.cmd('RCPT TO:<no-domain@localhost>')).toMatch(/^553 5\.1\.3 /);
    expect(await c.cmd('RSET')).toMatch(/^250 /);
  });
});
