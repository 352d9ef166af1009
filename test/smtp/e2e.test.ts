/**
 * End to end: nodemailer submits over STARTTLS + AUTH LOGIN, the delivery worker takes the
 * queued messages to a sink MX (found through a loopback DNS server). What arrives keeps the
 * submitted MIME, is DKIM-signed, and carries neither Bcc nor X-Postyard-Options.
 */
import dns from 'node:dns';
import { dkimVerify } from 'mailauth';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { mailer, messageRows, queuedId, type SmtpSetup, setupSmtp, swaks, swaksAuth, until } from './helpers.ts';

let s: SmtpSetup;
let dnsServer: DnsServer;
let sink: SinkMx;
let worker: DeliveryWorker;
const signing = testSigningKey();

beforeAll(async () => {
  sink = await startSinkMx();
  dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
    ...signing.zone,
  });
  s = await setupSmtp({
    POSTYARD_DNS_SERVERS: dnsServer.address,
    POSTYARD_MX_PORT: String(sink.port),
    POSTYARD_EHLO_NAME: 'postyard.test',
  });
  worker = startTestWorker(s.ctx.c, 'smtp-e2e-worker', { signing });
});
afterAll(async () => {
  await worker?.stop();
  await s?.close();
  await sink?.close();
  await dnsServer?.close();
});

async function delivered(transmissionId: string, count: number) {
  await until(async () => {
    const rows = await messageRows(s.ctx, transmissionId);
    return rows.length === count && rows.every((r) => r.state === 'delivered');
  }, 15_000);
}

it('nodemailer -> Postyard SMTP -> delivery worker -> sink MX: DKIM pass, no Bcc, no X-Postyard-Options', async () => {
  const t = mailer(s.smtp.port, s.cred, 'LOGIN');
  const info = await t.sendMail({
    from: 'Shop <news@shop.test>',
    to: 'ann@dest.test',
    bcc: 'hidden@dest.test',
    subject: 'Your order',
    text: 'Plain part',
    html: '<p>HTML part</p>',
    attachments: [{ filename: 'note.txt', content: 'attached' }],
    headers: { 'X-Postyard-Options': JSON.stringify({ tags: ['order'], metadata: { order: '7' } }) },
  });
  t.close();
  const id = queuedId(info.response);
  await delivered(id, 2);
  await sink.waitForMessages(2, 10_000);

  const got = sink.messages.filter((m) => m.rcptTo.some((r) => r === 'ann@dest.test' || r === 'hidden@dest.test'));
  expect(got.flatMap((m) => m.rcptTo).sort()).toEqual(['ann@dest.test', 'hidden@dest.test']);
  const resolver = new dns.promises.Resolver();
  resolver.setServers([dnsServer.address]);
  for (const m of got) {
    const raw = m.raw.toString('utf8');
    expect(raw).not.toMatch(/^bcc:/im);
    expect(raw).not.toContain('hidden@dest.test');
    expect(raw).not.toMatch(/^x-postyard-options:/im);
    expect(m.mailFrom).toMatch(/^bounces\+u[a-z2-7]{42}@bounces\.shop\.test$/);
    const verdict = await dkimVerify(m.raw, { resolver: (async (name: string) => resolver.resolveTxt(name)) as never });
    expect(verdict.results[0]?.status.result, JSON.stringify(verdict.results[0]?.status)).toBe('pass');
    const parsed = await simpleParser(m.raw);
    expect(parsed.subject).toBe('Your order');
    expect(parsed.text?.trim()).toBe('Plain part');
    expect(parsed.html).toContain('<p>HTML part</p>');
    expect(parsed.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([['note.txt', 'attached']]);
    expect(parsed.messageId).toBe(info.messageId);
  }
});

it('nodemailer with to, cc and bcc: a copy per envelope recipient, each with the To and Cc as written, none with Bcc', async () => {
  const t = mailer(s.smtp.port, s.cred, 'LOGIN');
  const info = await t.sendMail({
    from: 'Shop <news@shop.test>',
    to: ['Ann Lee <ann2@dest.test>', 'bob2@dest.test'],
    cc: 'Carl <carl2@dest.test>',
    bcc: ['dora2@dest.test', 'eve2@dest.test'],
    subject: 'Minutes',
    text: 'See you.',
  });
  t.close();
  const id = queuedId(info.response);
  await delivered(id, 5);
  const resolver = new dns.promises.Resolver();
  resolver.setServers([dnsServer.address]);
  const rcpts = ['ann2@dest.test', 'bob2@dest.test', 'carl2@dest.test', 'dora2@dest.test', 'eve2@dest.test'];
  for (const rcpt of rcpts) {
    const copies = sink.messages.filter((m) => m.rcptTo.includes(rcpt));
    expect(copies, rcpt).toHaveLength(1);
    const m = copies[0] as (typeof copies)[number];
    expect(m.rcptTo).toEqual([rcpt]);
    const raw = m.raw.toString('utf8');
    expect(raw).not.toMatch(/^bcc:/im);
    expect(raw).not.toContain('dora2@dest.test');
    expect(raw).not.toContain('eve2@dest.test');
    const parsed = await simpleParser(m.raw);
    const list = (f: typeof parsed.to) => (Array.isArray(f) ? f : f ? [f] : []).flatMap((a) => a.value);
    expect(list(parsed.to).map((a) => [a.name, a.address])).toEqual([
      ['Ann Lee', 'ann2@dest.test'],
      ['', 'bob2@dest.test'],
    ]);
    expect(list(parsed.cc).map((a) => [a.name, a.address])).toEqual([['Carl', 'carl2@dest.test']]);
    expect(parsed.messageId).toBe(info.messageId);
    const verdict = await dkimVerify(m.raw, { resolver: (async (name: string) => resolver.resolveTxt(name)) as never });
    expect(verdict.results[0]?.status.result, rcpt).toBe('pass');
  }
  // Each recipient's message and events say how the submitted headers addressed it.
  const view = (await call(s.ctx.app, 'GET', `/v1/transmissions/${id}`, { key: s.tenant.apiKey })).json() as {
    messages: { id: string; recipient: string; role: string }[];
  };
  const roles = Object.fromEntries(view.messages.map((m) => [m.recipient, m.role]));
  expect(roles).toEqual({
    'ann2@dest.test': 'to',
    'bob2@dest.test': 'to',
    'carl2@dest.test': 'cc',
    'dora2@dest.test': 'bcc',
    'eve2@dest.test': 'bcc',
  });
  const carl = view.messages.find((m) => m.recipient === 'carl2@dest.test');
  const message = await call(s.ctx.app, 'GET', `/v1/messages/${carl?.id}`, { key: s.tenant.apiKey });
  expect(message.json()).toMatchObject({ recipient: 'carl2@dest.test', role: 'cc' });
  const events = await call(s.ctx.app, 'GET', '/v1/events', {
    key: s.tenant.apiKey,
    query: { transmission_id: id, type: 'message.delivered' },
  });
  const delivered5 = (events.json() as { data: { recipient: string; role?: string }[] }).data;
  expect(delivered5).toHaveLength(5);
  for (const e of delivered5) expect(e.role, e.recipient).toBe(roles[e.recipient]);
});

it('swaks -> Postyard -> sink MX', async () => {
  const r = await swaks([
    ...swaksAuth(s.smtp.port, s.cred, 'LOGIN'),
    '--from',
    'news@shop.test',
    '--to',
    'bob@dest.test',
    '--header',
    'From: Shop <news@shop.test>',
    '--header',
    'Subject: via swaks',
    '--body',
    'Sent with swaks.',
  ]);
  expect(r.code, r.out).toBe(0);
  const id = /<~ {2}250 2\.0\.0 Ok: queued as ([0-9a-f-]{36})/.exec(r.out)?.[1] ?? '';
  await delivered(id, 1);
  const m = sink.messages.find((x) => x.rcptTo.includes('bob@dest.test'));
  expect(m?.raw.toString()).toContain('Sent with swaks.');
  expect(m?.raw.toString()).toMatch(/^DKIM-Signature: /m);
});
