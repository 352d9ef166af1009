/**
 * cc, bcc and inline images through POST /v1/transmissions, delivered by the worker (render
 * threads on, as configured by default) to a sink MX: a group message (any `cc` or `bcc`
 * recipient) gives every recipient its own DKIM-signed copy, each showing the same To and Cc,
 * no copy naming a bcc recipient; roles show on messages and events. Attachments with a
 * `content_id` are inline parts of a multipart/related beside the HTML.
 */
import { promises as dns } from 'node:dns';
import { dkimVerify } from 'mailauth';
import { type AddressObject, simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';
import { startTestWorker, testSigningKey } from '../helpers/delivery.ts';
import { type Destination, startDestination } from '../helpers/destination.ts';
import type { SinkMessage } from '../peers/sink-mx.ts';

/** A 1x1 PNG. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

let ctx: TestContext;
let t: TestTenant;
let destination: Destination;
let worker: DeliveryWorker;
let resolver: dns.Resolver;
const signing = testSigningKey();

beforeAll(async () => {
  destination = await startDestination({ signing });
  ctx = await createTestContext({ env: destination.env });
  t = await createTenant(ctx, 'Shop <news@shop.test>');
  worker = startTestWorker(ctx.c, 'group-messages-worker', { signing });
  resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([destination.dns.address]);
});
afterAll(async () => {
  await worker?.stop();
  await ctx?.close();
  await destination?.close();
});

interface MessageSummary {
  id: string;
  recipient: string;
  role: string;
  state: string;
}

function errors(res: { json(): unknown }) {
  return (res.json() as { errors: { code: string; field?: string; message: string }[] }).errors;
}

async function send(body: unknown): Promise<string> {
  const res = await call(ctx.app, 'POST', '/v1/transmissions', { key: t.apiKey, body });
  expect(res.statusCode, res.body).toBe(202);
  return (res.json() as { transmission_id: string }).transmission_id;
}

/** The transmission's messages once every one of them is delivered. */
async function delivered(id: string, count: number): Promise<MessageSummary[]> {
  const end = Date.now() + 20_000;
  for (;;) {
    const res = await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: t.apiKey });
    const messages = (res.json() as { messages: MessageSummary[] }).messages;
    if (messages.length === count && messages.every((m) => m.state === 'delivered')) return messages;
    if (Date.now() > end) throw new Error(`not delivered: ${JSON.stringify(messages)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The copy delivered to `rcpt` (each test uses its own addresses). */
function copyFor(rcpt: string): SinkMessage {
  const copies = destination.sink.messages.filter((m) => m.rcptTo.includes(rcpt));
  expect(copies, rcpt).toHaveLength(1);
  expect(copies[0]?.rcptTo).toEqual([rcpt]);
  return copies[0] as SinkMessage;
}

function addresses(field: AddressObject | AddressObject[] | undefined): { address?: string; name: string }[] {
  if (!field) return [];
  return (Array.isArray(field) ? field : [field]).flatMap((a) =>
    a.value.map((v) => ({ address: v.address, name: v.name })),
  );
}

/** The header section of a raw message. */
function headerOf(raw: Buffer): string {
  const text = raw.toString('latin1');
  return text.slice(0, text.indexOf('\r\n\r\n'));
}

async function dkimResult(raw: Buffer) {
  const verdict = await dkimVerify(raw, { resolver: (async (name: string) => resolver.resolveTxt(name)) as never });
  return verdict.results[0]?.status.result;
}

async function eventsOf(transmissionId: string) {
  const res = await call(ctx.app, 'GET', '/v1/events', { key: t.apiKey, query: { transmission_id: transmissionId } });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { data: { type: string; recipient: string; role?: string }[] }).data;
}

describe('group messages (recipients with cc and bcc)', () => {
  it('every copy shows the same To and Cc, no copy names a bcc recipient, each is DKIM-signed on its own', async () => {
    const id = await send({
      recipients: [
        { email: 'ann@dest.test', name: 'Ann Lee' },
        { email: 'bob@dest.test', role: 'to' },
        { email: 'carl@dest.test', name: 'Carl', role: 'cc' },
        { email: 'dora@dest.test', role: 'bcc' },
        { email: 'eve@dest.test', role: 'bcc' },
      ],
      content: {
        subject: 'Your order',
        text: 'Thanks for your order.',
        html: '<img src="cid:logo" alt="Shop"><p>Thanks for your order.</p>',
        attachments: [{ filename: 'logo.png', content_type: 'image/png', content_id: 'logo', data: PNG }],
      },
    });
    const messages = await delivered(id, 5);
    expect(Object.fromEntries(messages.map((m) => [m.recipient, m.role]))).toEqual({
      'ann@dest.test': 'to',
      'bob@dest.test': 'to',
      'carl@dest.test': 'cc',
      'dora@dest.test': 'bcc',
      'eve@dest.test': 'bcc',
    });

    const messageIds = new Set<string>();
    for (const rcpt of ['ann@dest.test', 'bob@dest.test', 'carl@dest.test', 'dora@dest.test', 'eve@dest.test']) {
      const copy = copyFor(rcpt);
      const head = headerOf(copy.raw);
      expect(head.match(/^To:/gim), rcpt).toHaveLength(1);
      expect(head.match(/^Cc:/gim), rcpt).toHaveLength(1);
      expect(head).not.toMatch(/^bcc:/im);
      // Not in any header, and not anywhere else in the bytes either (the bcc recipient's own copy included).
      expect(copy.raw.toString('latin1')).not.toContain('dora@dest.test');
      expect(copy.raw.toString('latin1')).not.toContain('eve@dest.test');
      const parsed = await simpleParser(copy.raw);
      expect(addresses(parsed.to), rcpt).toEqual([
        { address: 'ann@dest.test', name: 'Ann Lee' },
        { address: 'bob@dest.test', name: '' },
      ]);
      expect(addresses(parsed.cc), rcpt).toEqual([{ address: 'carl@dest.test', name: 'Carl' }]);
      expect(parsed.bcc).toBeUndefined();
      expect(await dkimResult(copy.raw), rcpt).toBe('pass');
      expect(head).toMatch(/^DKIM-Signature: .*d=shop\.test/m);
      messageIds.add(parsed.messageId ?? '');
      // The inline image is part of the multipart/related beside the HTML, in every copy.
      expect(copy.raw.toString('latin1')).toMatch(/^Content-Type: multipart\/related/im);
      const logo = parsed.attachments.find((a) => a.filename === 'logo.png');
      expect(logo?.contentId).toBe('<logo>');
      expect(logo?.related).toBe(true);
    }
    // Each copy is a message of its own: its own Message-ID (the message id at the From domain).
    expect(messageIds.size).toBe(5);
    for (const m of messages) expect(messageIds.has(`<${m.id}@shop.test>`)).toBe(true);

    // The message page and every event say how each recipient was addressed.
    const dora = messages.find((m) => m.recipient === 'dora@dest.test') as MessageSummary;
    const view = await call(ctx.app, 'GET', `/v1/messages/${dora.id}`, { key: t.apiKey });
    expect(view.json()).toMatchObject({ recipient: 'dora@dest.test', role: 'bcc', state: 'delivered' });
    // An open of the bcc recipient's copy (tracking writes its own events) names the role too.
    await ctx.c.tracking.record('open', dora.id, { ip: '192.0.2.7', userAgent: 'Mozilla/5.0' });
    const events = await eventsOf(id);
    expect(events.find((e) => e.type === 'message.opened')).toMatchObject({ recipient: 'dora@dest.test', role: 'bcc' });
    expect(events.filter((e) => e.type === 'message.accepted')).toHaveLength(5);
    expect(events.filter((e) => e.type === 'message.delivered')).toHaveLength(5);
    const roles = Object.fromEntries(messages.map((m) => [m.recipient, m.role]));
    for (const e of events) expect(e.role, `${e.type} ${e.recipient}`).toBe(roles[e.recipient]);
  });

  it('a duplicate keeps its first role; a suppressed cc recipient stays in the Cc of the others', async () => {
    const sup = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: t.apiKey,
      body: { items: [{ identifier: 'gone@dest.test', type: 'email', reason_category: 'hard_bounce' }] },
    });
    expect(sup.statusCode, sup.body).toBe(200);
    const res = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: {
        recipients: [
          { email: 'fay@dest.test' },
          { email: 'gone@dest.test', role: 'cc' },
          { email: 'gus@dest.test', role: 'cc' },
          { email: 'GUS@dest.test', role: 'bcc' },
        ],
        content: { subject: 'Minutes', text: 'See you.' },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const accepted = res.json() as { transmission_id: string; items: { email: string; status: string }[] };
    expect(accepted.items.map((i) => [i.email, i.status]).sort()).toEqual([
      ['gone@dest.test', 'suppressed'],
      ['gus@dest.test', 'duplicate'],
    ]);
    const all = (await call(ctx.app, 'GET', `/v1/transmissions/${accepted.transmission_id}`, { key: t.apiKey })).json()
      .messages as MessageSummary[];
    expect(all.find((m) => m.recipient === 'gone@dest.test')).toMatchObject({ role: 'cc', state: 'suppressed' });
    const end = Date.now() + 20_000;
    while (destination.sink.messages.filter((m) => /^(fay|gus)@/.test(m.rcptTo[0] ?? '')).length < 2) {
      if (Date.now() > end) throw new Error('not delivered');
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const rcpt of ['fay@dest.test', 'gus@dest.test']) {
      const parsed = await simpleParser(copyFor(rcpt).raw);
      expect(addresses(parsed.to).map((a) => a.address)).toEqual(['fay@dest.test']);
      expect(addresses(parsed.cc).map((a) => a.address)).toEqual(['gone@dest.test', 'gus@dest.test']);
    }
    expect(destination.sink.messages.some((m) => m.rcptTo.includes('gone@dest.test'))).toBe(false);
    const events = await eventsOf(accepted.transmission_id);
    expect(events.find((e) => e.type === 'message.suppressed')).toMatchObject({
      recipient: 'gone@dest.test',
      role: 'cc',
    });
    expect(events.find((e) => e.recipient === 'gus@dest.test')?.role).toBe('cc');
  });

  it('a group message without to recipients shows the empty group undisclosed-recipients as To, and no bcc', async () => {
    const id = await send({
      recipients: [
        { email: 'lea@dest.test', role: 'cc' },
        { email: 'max@dest.test', role: 'bcc' },
      ],
      content: { subject: 'Notice', text: 'For your information.' },
    });
    const messages = await delivered(id, 2);
    expect(messages.map((m) => [m.recipient, m.role]).sort()).toEqual([
      ['lea@dest.test', 'cc'],
      ['max@dest.test', 'bcc'],
    ]);
    for (const rcpt of ['lea@dest.test', 'max@dest.test']) {
      const copy = copyFor(rcpt);
      const head = headerOf(copy.raw);
      // RFC 5322's empty group (its display name quoted: MailComposer quotes names holding `-`).
      expect(head).toMatch(/^To: "undisclosed-recipients":;$/m);
      expect(head).toMatch(/^Cc: lea@dest\.test\r?$/m);
      expect(copy.raw.toString('latin1')).not.toContain('max@dest.test');
      expect(await dkimResult(copy.raw), rcpt).toBe('pass');
    }
  });

  it('without roles each copy is addressed to its recipient alone, and events carry no role', async () => {
    const id = await send({
      recipients: [{ email: 'hal@dest.test', name: 'Hal' }, { email: 'ida@dest.test' }],
      content: { subject: 'Hello', text: 'Hi.' },
    });
    const messages = await delivered(id, 2);
    expect(messages.map((m) => m.role)).toEqual(['to', 'to']);
    for (const rcpt of ['hal@dest.test', 'ida@dest.test']) {
      const copy = copyFor(rcpt);
      const parsed = await simpleParser(copy.raw);
      expect(addresses(parsed.to).map((a) => a.address)).toEqual([rcpt]);
      expect(parsed.cc).toBeUndefined();
      expect(headerOf(copy.raw)).not.toMatch(/^cc:/im);
    }
    const events = await eventsOf(id);
    expect(events.length).toBe(4);
    for (const e of events) expect(e).not.toHaveProperty('role');
  });

  it('refuses a group message of more than 50 recipients, and an unknown role', async () => {
    const many = Array.from({ length: 51 }, (_, i) => ({
      email: `r${i}@dest.test`,
      ...(i === 0 ? { role: 'cc' } : {}),
    }));
    const tooMany = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: many, content: { subject: 's', text: 'x' } },
    });
    expect(tooMany.statusCode).toBe(422);
    expect(errors(tooMany)).toEqual([
      {
        code: 'validation_failed',
        field: 'recipients',
        message: 'a transmission with cc or bcc recipients may have at most 50 recipients',
      },
    ]);
    // 50 is fine, and so are 51 recipients without roles.
    expect(
      (
        await call(ctx.app, 'POST', '/v1/transmissions', {
          key: t.apiKey,
          body: { recipients: many.slice(0, 50), content: { subject: 's', text: 'x' }, options: { sandbox: true } },
        })
      ).statusCode,
    ).toBe(202);
    expect(
      (
        await call(ctx.app, 'POST', '/v1/transmissions', {
          key: t.apiKey,
          body: {
            recipients: many.map((r) => ({ email: r.email })),
            content: { subject: 's', text: 'x' },
            options: { sandbox: true },
          },
        })
      ).statusCode,
    ).toBe(202);

    const unknownRole = await call(ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: 'a@dest.test', role: 'boss' }], content: { subject: 's', text: 'x' } },
    });
    expect(unknownRole.statusCode).toBe(422);
    expect(errors(unknownRole).map((e) => e.field)).toContain('recipients[0].role');
  });
});

describe('inline images (attachments with content_id)', () => {
  it('are inline parts of a multipart/related with the HTML, resolved by cid; other attachments stay attached', async () => {
    const id = await send({
      recipients: [{ email: 'jo@dest.test' }, { email: 'kim@dest.test' }],
      content: {
        subject: 'Newsletter',
        text: 'Our news.',
        html: '<p><img src="cid:logo@shop" alt="Shop"></p><p>Our news.</p>',
        attachments: [
          { filename: 'logo.png', content_type: 'image/png', content_id: 'logo@shop', data: PNG },
          { filename: 'terms.txt', content_type: 'text/plain', data: Buffer.from('terms').toString('base64') },
        ],
      },
    });
    const view = await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: t.apiKey });
    expect(view.json().content.attachments).toEqual([
      { filename: 'logo.png', content_type: 'image/png', size: 70, content_id: 'logo@shop' },
      { filename: 'terms.txt', content_type: 'text/plain', size: 5 },
    ]);
    await delivered(id, 2);
    for (const rcpt of ['jo@dest.test', 'kim@dest.test']) {
      const copy = copyFor(rcpt);
      const text = copy.raw.toString('latin1');
      expect(await dkimResult(copy.raw), rcpt).toBe('pass');
      // multipart/mixed [ multipart/alternative [ text, multipart/related [ html, image ] ], terms.txt ]
      const related = text.indexOf('Content-Type: multipart/related');
      const html = text.indexOf('Content-Type: text/html');
      const image = text.indexOf('Content-Type: image/png');
      const terms = text.indexOf('terms.txt');
      expect(related, rcpt).toBeGreaterThan(0);
      expect(html).toBeGreaterThan(related);
      expect(image).toBeGreaterThan(html);
      expect(terms).toBeGreaterThan(image);
      expect(text).toMatch(/^Content-Id: <logo@shop>\r$/im);
      expect(text.slice(image)).toMatch(/^Content-Disposition: inline\b/im);
      const parsed = await simpleParser(copy.raw);
      const logo = parsed.attachments.find((a) => a.filename === 'logo.png');
      expect(logo).toMatchObject({
        contentId: '<logo@shop>',
        cid: 'logo@shop',
        related: true,
        contentDisposition: 'inline',
      });
      expect(logo?.content.toString('base64')).toBe(PNG);
      const terms2 = parsed.attachments.find((a) => a.filename === 'terms.txt');
      expect(terms2?.contentDisposition).toBe('attachment');
      expect(terms2?.related ?? false).toBe(false);
      // The HTML as sent references the part by cid; a MIME parser resolves it to the image.
      expect(text).toMatch(/src=(3D)?"cid:logo@shop"/);
      expect(parsed.html).toContain(`src="data:image/png;base64,${PNG}"`);
    }
  });

  it('refuses a content_id with angle brackets, spaces or control characters, naming the field', async () => {
    for (const contentId of ['<logo>', 'my logo', 'logo\r\nX-Injected: 1', '']) {
      const res = await call(ctx.app, 'POST', '/v1/transmissions', {
        key: t.apiKey,
        body: {
          recipients: [{ email: 'a@dest.test' }],
          content: {
            subject: 's',
            html: '<img src="cid:x">',
            attachments: [{ filename: 'a.png', content_type: 'image/png', content_id: contentId, data: PNG }],
          },
        },
      });
      expect(res.statusCode, contentId).toBe(422);
      expect(errors(res).map((e) => e.field)).toContain('content.attachments[0].content_id');
    }
  });
});
