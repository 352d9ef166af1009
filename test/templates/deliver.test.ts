/**
 * Mail rendered by the template language, delivered to a real SMTP sink (test/peers/sink-mx.ts)
 * in the default configuration (render threads on), DKIM verified by the independent verifier:
 * stored templates over the API (per-recipient data over transmission data over defaults) and
 * over SMTP (X-Postyard-Options), inline content, a generated text part, and a recipient whose
 * data fails to render (message.failed, reason render_failed: ...) while the others are sent.
 */
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import { generateDkimKeyPair } from '../../src/modules/delivery/render/dkim.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call } from '../helpers/context.ts';
import { type DkimVerifier, startDkimVerifier } from '../peers/dkim-verifier.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type SinkMessage, type SinkMx, startSinkMx } from '../peers/sink-mx.ts';
import { message, queuedId, RawClient, type SmtpSetup, sendRaw, setupSmtp } from '../smtp/helpers.ts';

let s: SmtpSetup;
let dnsServer: DnsServer;
let sink: SinkMx;
let verifier: DkimVerifier;
let worker: DeliveryWorker;
let client: RawClient;
const keys = generateDkimKeyPair();

beforeAll(async () => {
  sink = await startSinkMx();
  dnsServer = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
  });
  verifier = await startDkimVerifier('example.com', 's1', keys.publicKeyBase64);
  // POSTYARD_RENDER_THREADS is left unset: the default configuration renders on threads.
  s = await setupSmtp({
    POSTYARD_DNS_SERVERS: dnsServer.address,
    POSTYARD_MX_PORT: String(sink.port),
    POSTYARD_EHLO_NAME: 'postyard.test',
  });
  worker = createDeliveryWorker(s.ctx.c, 'templates-deliver-worker', {
    pollMs: 50,
    signingKey: async (_tenant, domain) =>
      domain === 'example.com'
        ? {
            domainName: 'example.com',
            keySelector: 's1',
            privateKeyPem: keys.privateKeyPem,
            returnPathDomain: 'example.com',
          }
        : null,
  });
  worker.start();
  client = await RawClient.ready(s.smtp.port, s.cred);
});
afterAll(async () => {
  client?.destroy();
  await worker?.stop();
  await s?.close();
  await sink?.close();
  await verifier?.close();
  await dnsServer?.close();
});

async function deliveredTo(rcpt: string): Promise<SinkMessage> {
  const end = Date.now() + 30_000;
  for (;;) {
    const m = sink.messages.find((x) => x.rcptTo.includes(rcpt));
    if (m) return m;
    if (Date.now() > end) throw new Error(`nothing delivered to ${rcpt}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function messageState(transmissionId: string, rcpt: string) {
  const end = Date.now() + 30_000;
  for (;;) {
    const m = await s.ctx.c.database.db
      .selectFrom('messages')
      .select(['id', 'state', 'last_response'])
      .where('transmission_id', '=', transmissionId)
      .where('recipient', '=', rcpt)
      .executeTakeFirstOrThrow();
    if (m.state !== 'queued' && m.state !== 'sending') return m;
    if (Date.now() > end) throw new Error(`message to ${rcpt} still ${m.state}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function createTemplate(body: Record<string, unknown>): Promise<string> {
  const key = s.tenant.apiKey;
  const res = await call(s.ctx.app, 'POST', '/v1/templates', { key, body });
  expect(res.statusCode, res.body).toBe(201);
  const id = (res.json() as { id: string }).id;
  expect((await call(s.ctx.app, 'POST', `/v1/templates/${id}/publish`, { key })).statusCode).toBe(200);
  return id;
}

describe('stored templates, delivered', () => {
  it('renders each recipient with its data over the transmission’s over the defaults; DKIM passes', async () => {
    expect(s.ctx.c.config.renderThreads).toBeGreaterThanOrEqual(1);
    const id = await createTemplate({
      name: 'receipt',
      subject: 'Order {{order.id}} for {{name}}',
      text: 'Hi {{name}}, plan {{plan}}.\n{{#each items}}- {{this}}\n{{/each}}',
      html: '<p>Hi {{name}} <b>{{plan}}</b></p>{{#if vip}}<p>VIP</p>{{/if}}',
      from: '{{shop}} <shop@example.com>',
      reply_to: 'Help <help@example.com>',
      headers: { 'X-Order': '{{order.id}}' },
      defaults: { plan: 'free', shop: 'The Shop', name: 'customer' },
    });
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: s.tenant.apiKey,
      body: {
        recipients: [
          {
            email: 'ann@dest.test',
            substitution_data: { name: 'Ann <&>', order: { id: 'A1' }, vip: true, items: ['x', 'y'] },
          },
          { email: 'bob@dest.test', substitution_data: { name: 'Bob', order: { id: 'B2' }, plan: 'gold' } },
        ],
        content: { template_id: id },
        substitution_data: { plan: 'pro' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);

    const ann = await deliveredTo('ann@dest.test');
    expect(await verifier.verify(ann.raw)).toBe('pass');
    const a = await simpleParser(ann.raw);
    expect(a.subject).toBe('Order A1 for Ann <&>');
    expect(a.text).toBe('Hi Ann <&>, plan pro.\n- x\n- y\n');
    expect(a.html).toBe('<p>Hi Ann &lt;&amp;&gt; <b>pro</b></p><p>VIP</p>');
    expect(a.from?.value[0]).toEqual({ name: 'The Shop', address: 'shop@example.com' });
    expect(a.replyTo?.value[0]?.address).toBe('help@example.com');
    expect(a.headers.get('x-order')).toBe('A1');

    const bob = await deliveredTo('bob@dest.test');
    expect(await verifier.verify(bob.raw)).toBe('pass');
    const b = await simpleParser(bob.raw);
    expect(b.subject).toBe('Order B2 for Bob');
    expect(b.text).toBe('Hi Bob, plan gold.\n');
    expect(b.html).toBe('<p>Hi Bob <b>gold</b></p>');
  });

  it('fails only the recipient whose data puts CR/LF into a header (message.failed render_failed), sends the others', async () => {
    const id = await createTemplate({ name: 'inject', subject: 'Hello {{name}}', html: '<p>{{name}}</p>' });
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: s.tenant.apiKey,
      body: {
        recipients: [
          { email: 'evil@dest.test', substitution_data: { name: 'x\r\nBcc: victim@dest.test' } },
          { email: 'fine@dest.test', substitution_data: { name: 'Fine' } },
          { email: 'plain@dest.test' },
        ],
        content: { template_id: id },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const txId = (res.json() as { transmission_id: string }).transmission_id;

    const fine = await simpleParser((await deliveredTo('fine@dest.test')).raw);
    expect(fine.subject).toBe('Hello Fine');
    // HTML-only template: a text part was generated from the rendered html.
    expect(fine.text?.trim()).toBe('Fine');
    const plain = await simpleParser((await deliveredTo('plain@dest.test')).raw);
    expect(plain.subject?.trim()).toBe('Hello');

    const evil = await messageState(txId, 'evil@dest.test');
    expect(evil.state).toBe('failed');
    const events = await s.ctx.c.database.db
      .selectFrom('events')
      .select(['type', 'data'])
      .where('message_id', '=', evil.id)
      .execute();
    const failed = events.find((e) => e.type === 'message.failed');
    const reason = (JSON.parse(String(failed?.data ?? '{}')) as { reason?: string }).reason;
    expect(reason).toMatch(/^render_failed: subject: /);
    expect(
      sink.messages.some((m) => m.rcptTo.includes('evil@dest.test') || m.rcptTo.includes('victim@dest.test')),
    ).toBe(false);
  });

  it('sends by template over SMTP with X-Postyard-Options template_id and substitution_data', async () => {
    const id = await createTemplate({
      name: 'smtp-tpl',
      subject: 'SMTP {{what}}',
      text: 'Body for {{who}} ({{what}})',
      defaults: { who: 'you' },
    });
    const options = JSON.stringify({ template_id: id, substitution_data: { what: 'works' } });
    const reply = await sendRaw(
      client,
      ['smtp-tpl@dest.test'],
      message({
        to: 'smtp-tpl@dest.test',
        subject: 'ignored',
        body: 'ignored body',
        headers: [`X-Postyard-Options: ${options}`],
      }),
    );
    queuedId(reply);
    const m = await deliveredTo('smtp-tpl@dest.test');
    expect(await verifier.verify(m.raw)).toBe('pass');
    const p = await simpleParser(m.raw);
    expect(p.subject).toBe('SMTP works');
    expect(p.text?.trim()).toBe('Body for you (works)');
    expect(p.headers.has('x-postyard-options')).toBe(false);

    const unknown = await sendRaw(
      client,
      ['smtp-tpl2@dest.test'],
      message({ headers: ['X-Postyard-Options: {"template_id":"0193a1b2-0000-7000-8000-000000000000"}'] }),
    );
    expect(unknown).toMatch(/^550 5\.6\.0 .*template_id/);
  });
});

describe('a template sent over SMTP to cc and bcc recipients', () => {
  it('every copy shows the submitted To and Cc, none the Bcc', async () => {
    const id = await createTemplate({ name: 'smtp-group-tpl', subject: 'Minutes', text: 'See the minutes.' });
    const rcpts = ['grp-to@dest.test', 'grp-cc@dest.test', 'grp-bcc@dest.test'];
    const reply = await sendRaw(
      client,
      rcpts,
      message({
        to: 'Team <grp-to@dest.test>',
        headers: ['Cc: grp-cc@dest.test', 'Bcc: grp-bcc@dest.test', `X-Postyard-Options: {"template_id":"${id}"}`],
      }),
    );
    queuedId(reply);
    for (const rcpt of rcpts) {
      const m = await deliveredTo(rcpt);
      expect(m.rcptTo).toEqual([rcpt]);
      expect(await verifier.verify(m.raw)).toBe('pass');
      const p = await simpleParser(m.raw);
      expect(p.subject).toBe('Minutes');
      const to = Array.isArray(p.to) ? p.to[0] : p.to;
      const cc = Array.isArray(p.cc) ? p.cc[0] : p.cc;
      expect(to?.value.map((a) => [a.name, a.address])).toEqual([['Team', 'grp-to@dest.test']]);
      expect(cc?.value.map((a) => a.address)).toEqual(['grp-cc@dest.test']);
      expect(m.raw.toString('latin1')).not.toContain('grp-bcc@dest.test');
    }
  });
});

describe('inline content, delivered', () => {
  it('uses the same language (each, if, escaping in html) with shared and per-recipient data', async () => {
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: s.tenant.apiKey,
      body: {
        recipients: [
          { email: 'inline1@dest.test', substitution_data: { name: 'One' } },
          { email: 'inline2@dest.test' },
        ],
        content: {
          subject: '{{greeting}} {{name}}',
          html: '<ul>{{#each list}}<li>{{this}}</li>{{/each}}</ul>{{#unless name}}<p>anon</p>{{/unless}}',
        },
        substitution_data: { greeting: 'Hey', list: ['<a>', 'b'] },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const one = await deliveredTo('inline1@dest.test');
    expect(await verifier.verify(one.raw)).toBe('pass');
    const p1 = await simpleParser(one.raw);
    expect(p1.subject).toBe('Hey One');
    expect(p1.html).toBe('<ul><li>&lt;a&gt;</li><li>b</li></ul>');
    expect(p1.text).toContain('* <a>');
    const two = await deliveredTo('inline2@dest.test');
    expect(await verifier.verify(two.raw)).toBe('pass');
    const p2 = await simpleParser(two.raw);
    expect(p2.subject?.trim()).toBe('Hey');
    expect(p2.html).toBe('<ul><li>&lt;a&gt;</li><li>b</li></ul><p>anon</p>');
  });
});
