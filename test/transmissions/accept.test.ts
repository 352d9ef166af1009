import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';

let ctx: TestContext;
let t: TestTenant;
let other: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  t = await createTenant(ctx);
  other = await createTenant(ctx);
});
afterAll(async () => ctx?.close());

const minimal = (email = 'ann@example.com') => ({
  recipients: [{ email }],
  content: { subject: 'Hello', text: 'Hi there' },
});

async function send(body: unknown, key = t.apiKey, headers: Record<string, string> = {}) {
  return call(ctx.app, 'POST', '/v1/transmissions', { key, body, headers });
}

describe('POST /v1/transmissions', () => {
  it('accepts the seed minimal body with the tenant default sender', async () => {
    const res = await send(minimal());
    expect(res.statusCode).toBe(202);
    const body = res.json();
    expect(body).toEqual({
      transmission_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      items: [],
      total_accepted_recipients: 1,
      total_rejected_recipients: 0,
    });
    const msgs = await ctx.c.database.db
      .selectFrom('messages')
      .selectAll()
      .where('transmission_id', '=', body.transmission_id)
      .execute();
    expect(msgs).toHaveLength(1);
    expect(msgs[0]?.state).toBe('queued');
    const tx = await ctx.c.database.db
      .selectFrom('transmissions')
      .selectAll()
      .where('id', '=', body.transmission_id)
      .executeTakeFirstOrThrow();
    expect(JSON.parse(tx.content).from).toBe('Test <sender@example.com>');
    const events = await ctx.c.database.db
      .selectFrom('events')
      .selectAll()
      .where('transmission_id', '=', body.transmission_id)
      .execute();
    expect(events.map((e) => e.type)).toEqual(['message.accepted']);
    expect(events[0]?.message_id).toBe(msgs[0]?.id);
  });

  it('stores every field: names, substitution data, merged metadata, tags, headers, attachments', async () => {
    const res = await send({
      recipients: [
        { email: 'a@Example.COM', name: 'Ann', substitution_data: { first: 'Ann' }, metadata: { crm: '1' } },
        { email: 'b@example.com' },
      ],
      content: {
        subject: 'Hi {{first}}',
        text: 'Hello {{first}}',
        html: '<p>Hello {{first}}</p>',
        from: 'Shop <shop@mail.example.com>',
        reply_to: 'help@example.com',
        headers: { 'X-Campaign': 'nov' },
        attachments: [{ filename: 'a.txt', content_type: 'text/plain', data: Buffer.from('hello').toString('base64') }],
      },
      options: { mail_type: 'marketing', tags: ['welcome'], metadata: { k: 'v', crm: '0' } },
    });
    expect(res.statusCode).toBe(202);
    const id = res.json().transmission_id;
    const view = await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: t.apiKey });
    expect(view.statusCode).toBe(200);
    const v = view.json();
    expect(v.mail_type).toBe('marketing');
    expect(v.tags).toEqual(['welcome']);
    expect(v.content).toMatchObject({ from: 'Shop <shop@mail.example.com>', has_text: true, has_html: true });
    expect(v.content.attachments).toEqual([{ filename: 'a.txt', content_type: 'text/plain', size: 5 }]);
    expect(v.messages.map((m: { recipient: string }) => m.recipient).sort()).toEqual([
      'a@example.com',
      'b@example.com',
    ]);
    const ann = v.messages.find((m: { recipient: string }) => m.recipient === 'a@example.com');
    const msg = await call(ctx.app, 'GET', `/v1/messages/${ann.id}`, { key: t.apiKey });
    expect(msg.statusCode).toBe(200);
    expect(msg.json()).toMatchObject({
      recipient: 'a@example.com',
      recipient_name: 'Ann',
      state: 'queued',
      metadata: { k: 'v', crm: '1' },
      attempts: [],
    });
  });

  it('lists duplicates in items and queues one message per unique recipient', async () => {
    const res = await send({
      recipients: [{ email: 'dup@example.com' }, { email: 'dup@EXAMPLE.com' }, { email: 'x@example.com' }],
      content: { subject: 's', html: '<b>x</b>' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({
      items: [{ email: 'dup@example.com', status: 'duplicate' }],
      total_accepted_recipients: 2,
      total_rejected_recipients: 1,
    });
  });

  it('lists suppressed recipients (email and domain rules) with message.suppressed events', async () => {
    const sup = await call(ctx.app, 'POST', '/v1/suppressions', {
      key: t.apiKey,
      body: {
        items: [
          { identifier: 'blocked@example.org', type: 'email', reason_category: 'hard_bounce' },
          { identifier: 'blocked-domain.test', type: 'domain', reason_category: 'manual' },
        ],
      },
    });
    expect(sup.statusCode).toBe(200);
    const res = await send({
      recipients: [
        { email: 'blocked@EXAMPLE.org' },
        { email: 'anyone@Blocked-Domain.test' },
        { email: 'ok@example.org' },
      ],
      content: { subject: 's', text: 't' },
    });
    expect(res.statusCode).toBe(202);
    const body = res.json();
    expect(body.items).toEqual([
      { email: 'blocked@example.org', status: 'suppressed', reason: 'hard_bounce' },
      { email: 'anyone@blocked-domain.test', status: 'suppressed', reason: 'manual' },
    ]);
    expect(body.total_accepted_recipients).toBe(1);
    const events = await ctx.c.database.db
      .selectFrom('events')
      .selectAll()
      .where('transmission_id', '=', body.transmission_id)
      .orderBy('recipient')
      .execute();
    expect(events.map((e) => [e.recipient, e.type])).toEqual([
      ['anyone@blocked-domain.test', 'message.suppressed'],
      ['blocked@example.org', 'message.suppressed'],
      ['ok@example.org', 'message.accepted'],
    ]);
    // The other tenant's suppressions do not apply.
    const res2 = await send(
      { recipients: [{ email: 'blocked@example.org' }], content: { subject: 's', text: 't' } },
      other.apiKey,
    );
    expect(res2.json().items).toEqual([]);
  });

  it('accepts 10,000 recipients and refuses 10,001', async () => {
    const recipients = Array.from({ length: 10_000 }, (_, i) => ({ email: `r${i}@bulk.example.com` }));
    const res = await send({ recipients, content: { subject: 's', text: 't' } });
    expect(res.statusCode).toBe(202);
    expect(res.json().total_accepted_recipients).toBe(10_000);
    const n = await ctx.c.database.db
      .selectFrom('messages')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('transmission_id', '=', res.json().transmission_id)
      .executeTakeFirstOrThrow();
    expect(Number(n.n)).toBe(10_000);
    const tooMany = await send({
      recipients: [...recipients, { email: 'one@more.com' }],
      content: { subject: 's', text: 't' },
    });
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().errors[0].field).toBe('recipients');
  });
});

describe('validation', () => {
  const cases: [string, unknown, string][] = [
    ['missing recipients', { content: { subject: 's', text: 't' } }, 'recipients'],
    ['empty recipients', { recipients: [], content: { subject: 's', text: 't' } }, 'recipients'],
    [
      'bad email',
      { recipients: [{ email: 'ok@x.com' }, { email: 'not-an-email' }], content: { subject: 's', text: 't' } },
      'recipients[1].email',
    ],
    ['missing subject', { recipients: [{ email: 'a@x.com' }], content: { text: 't' } }, 'content.subject'],
    ['no body', { recipients: [{ email: 'a@x.com' }], content: { subject: 's' } }, 'content'],
    ['unknown top-level field', { ...minimal(), extra: 1 }, 'extra'],
    [
      'unknown content field',
      { recipients: [{ email: 'a@x.com' }], content: { subject: 's', text: 't', bogus: 1 } },
      'content.bogus',
    ],
    ['bad mail_type', { ...minimal(), options: { mail_type: 'bulk' } }, 'options.mail_type'],
    ['11 tags', { ...minimal(), options: { tags: Array.from({ length: 11 }, (_, i) => `t${i}`) } }, 'options.tags'],
    ['long tag', { ...minimal(), options: { tags: ['x'.repeat(65)] } }, 'options.tags[0]'],
    ['non-string metadata', { ...minimal(), options: { metadata: { a: 1 } } }, 'options.metadata.a'],
    [
      '51 metadata keys',
      { ...minimal(), options: { metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) } },
      'options.metadata',
    ],
    [
      'metadata over 10 KB',
      {
        ...minimal(),
        options: { metadata: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`k${i}`, 'v'.repeat(2500)])) },
      },
      'options.metadata',
    ],
    [
      'CRLF in subject',
      { recipients: [{ email: 'a@x.com' }], content: { subject: 'Hi\r\nBcc: evil@x.com', text: 't' } },
      'content.subject',
    ],
    [
      'CRLF in header value',
      {
        recipients: [{ email: 'a@x.com' }],
        content: { subject: 's', text: 't', headers: { 'X-A': 'v\r\nBcc: evil@x.com' } },
      },
      'content.headers.X-A',
    ],
    [
      'LF in recipient name',
      { recipients: [{ email: 'a@x.com', name: 'A\nBcc: e@x.com' }], content: { subject: 's', text: 't' } },
      'recipients[0].name',
    ],
    [
      'CRLF in from',
      { recipients: [{ email: 'a@x.com' }], content: { subject: 's', text: 't', from: 'a@x.com\r\nBcc: e@x.com' } },
      'content.from',
    ],
    [
      'CRLF in reply_to',
      { recipients: [{ email: 'a@x.com' }], content: { subject: 's', text: 't', reply_to: 'a@x.com\nX: y' } },
      'content.reply_to',
    ],
    [
      'reserved header',
      { recipients: [{ email: 'a@x.com' }], content: { subject: 's', text: 't', headers: { From: 'x@y.com' } } },
      'content.headers.From',
    ],
    [
      'bad attachment base64',
      {
        recipients: [{ email: 'a@x.com' }],
        content: { subject: 's', text: 't', attachments: [{ filename: 'a', content_type: 'text/plain', data: '***' }] },
      },
      'content.attachments[0].data',
    ],
    [
      'unknown template',
      { recipients: [{ email: 'a@x.com' }], content: { subject: 's', template_id: 'nope' } },
      'content.template_id',
    ],
    ['bad start_time', { ...minimal(), options: { start_time: 'tomorrow' } }, 'options.start_time'],
  ];
  it.each(cases)('%s -> 422 naming %s, nothing written', async (_name, body, field) => {
    const before = await ctx.c.database.db
      .selectFrom('transmissions')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    const res = await send(body);
    expect(res.statusCode).toBe(422);
    const errors = res.json().errors as { code: string; field?: string }[];
    expect(errors.map((e) => e.field)).toContain(field);
    expect(errors.every((e) => typeof e.code === 'string')).toBe(true);
    const after = await ctx.c.database.db
      .selectFrom('transmissions')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n));
  });

  it('refuses a tenant without default sender when from is absent', async () => {
    const t2 = await ctx.c.tenants.create({ name: 'no-from' });
    const res = await send(minimal(), t2.api_key);
    expect(res.statusCode).toBe(422);
    expect(res.json().errors[0].field).toBe('content.from');
  });

  it('reports several bad fields at once', async () => {
    const res = await send({ recipients: [{ email: 'x' }, { email: 'y' }], content: { subject: 's', text: 't' } });
    expect(res.json().errors.map((e: { field: string }) => e.field)).toEqual([
      'recipients[0].email',
      'recipients[1].email',
    ]);
  });
});

describe('reading transmissions and messages', () => {
  it('requires send:transmissions or read:events, and hides other tenants', async () => {
    const id = (await send(minimal())).json().transmission_id;
    const reader = await keyWithScopes(ctx, t.tenantId, ['read:events']);
    expect((await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: reader })).statusCode).toBe(200);
    const noScope = await keyWithScopes(ctx, t.tenantId, ['manage:webhooks']);
    expect((await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: noScope })).statusCode).toBe(403);
    expect((await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: other.apiKey })).statusCode).toBe(404);
    expect((await call(ctx.app, 'GET', '/v1/transmissions/not-a-uuid', { key: t.apiKey })).statusCode).toBe(404);
    const msgId = (await call(ctx.app, 'GET', `/v1/transmissions/${id}`, { key: t.apiKey })).json().messages[0].id;
    expect((await call(ctx.app, 'GET', `/v1/messages/${msgId}`, { key: other.apiKey })).statusCode).toBe(404);
  });
});
