/**
 * Header injection (docs/security.md, "Outbound SMTP" and "API"). CR/LF in the subject, header
 * values, recipient names, from and reply_to are refused with 422 by test/transmissions/accept.test.ts
 * ("CRLF in ..."); this file covers the remaining ways in:
 * - the other header-bound fields of a transmission (attachment filename and type, header names,
 *   addresses, tags) are refused with 422 naming the field;
 * - per-recipient substitution data is NOT validated (any JSON), so the rendered message is
 *   checked: a CRLF smuggled into the subject through {{variables}} never becomes a header;
 * - HTTP responses: a path with an encoded CRLF cannot split the dashboard's redirect.
 */
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MessagesTable } from '../../src/db/schema.ts';
import { newId } from '../../src/lib/ids.ts';
import { forDelivery, renderMessage } from '../../src/modules/delivery/render/renderer.ts';
import { call, createTenant, createTestContext, type TestContext, type TestTenant } from '../helpers/context.ts';

const INJECT = '\r\nBcc: victim@evil.test\r\nX-Injected: yes';

let ctx: TestContext;
let tenant: TestTenant;
beforeAll(async () => {
  ctx = await createTestContext();
  tenant = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

const base = () => ({ recipients: [{ email: 'ann@example.com' }], content: { subject: 's', text: 't' } });
const attachment = (over: Record<string, string>) => ({
  ...base(),
  content: {
    subject: 's',
    text: 't',
    attachments: [{ filename: 'a.txt', content_type: 'text/plain', data: 'eA==', ...over }],
  },
});

describe('the API refuses header-bound fields carrying a line break', () => {
  const cases: [string, unknown, string][] = [
    ['attachment filename', attachment({ filename: `a.txt${INJECT}` }), 'content.attachments[0].filename'],
    [
      'attachment content_type',
      attachment({ content_type: `text/plain${INJECT}` }),
      'content.attachments[0].content_type',
    ],
    [
      'header name',
      { ...base(), content: { subject: 's', text: 't', headers: { [`X-A${INJECT}`]: 'v' } } },
      `content.headers.X-A${INJECT}`,
    ],
    ['recipient address', { ...base(), recipients: [{ email: `ann@example.com${INJECT}` }] }, 'recipients[0].email'],
    ['tag', { ...base(), options: { tags: [`t${INJECT}`] } }, 'options.tags[0]'],
  ];
  it.each(cases)('%s: 422 naming the field, nothing stored', async (_what, body, field) => {
    const before = await ctx.c.database.db.selectFrom('transmissions').select('id').execute();
    const res = await call(ctx.app, 'POST', '/v1/transmissions', { key: tenant.apiKey, body });
    expect(res.statusCode, res.body).toBe(422);
    const errors = (res.json() as { errors: { field?: string }[] }).errors;
    expect(errors.map((e) => e.field)).toContain(field);
    const after = await ctx.c.database.db.selectFrom('transmissions').select('id').execute();
    expect(after.length).toBe(before.length);
  });
});

describe('substitution data cannot add headers to the rendered message', () => {
  async function renderFirst(body: unknown) {
    const res = await call(ctx.app, 'POST', '/v1/transmissions', { key: tenant.apiKey, body });
    expect(res.statusCode, res.body).toBe(202);
    const txId = (res.json() as { transmission_id: string }).transmission_id;
    const db = ctx.c.database.db;
    const msg = (await db
      .selectFrom('messages')
      .selectAll()
      .where('transmission_id', '=', txId)
      .executeTakeFirstOrThrow()) as MessagesTable;
    const tx = await db.selectFrom('transmissions').selectAll().where('id', '=', txId).executeTakeFirstOrThrow();
    return { msg, render: () => renderMessage(msg, forDelivery(tx), null, 'verp-token', 'bounce.example.net') };
  }

  it('a CRLF in substituted data fails that message in a header, and stays text in the bodies', async () => {
    // In the subject (or From name, Reply-To name, a header value): the message is not built.
    const bad = await renderFirst({
      recipients: [{ email: 'ann@example.com', substitution_data: { first: `Ann${INJECT}` } }],
      content: { subject: 'Hi {{first}}', text: 'x', headers: { 'X-Campaign': 'nov' } },
    });
    await expect(bad.render()).rejects.toThrow(/^render_failed: subject: /);
    const badHeader = await renderFirst({
      recipients: [{ email: 'ann@example.com', substitution_data: { c: `nov${INJECT}` } }],
      content: { subject: 'Hi', text: 'x', headers: { 'X-Campaign': '{{c}}' } },
    });
    await expect(badHeader.render()).rejects.toThrow(/^render_failed: headers\.X-Campaign: /);

    // In the text and html parts it is body text: no header appears, html values are escaped.
    const ok = await renderFirst({
      recipients: [{ email: 'ann@example.com', substitution_data: { first: 'Ann', note: `n${INJECT}` } }],
      content: {
        subject: 'Hi {{first}}',
        text: 'Text {{note}}',
        html: '<p>{{note}}</p>',
        headers: { 'X-Campaign': 'nov' },
      },
    });
    const rendered = await ok.render();
    const raw = rendered.raw.toString('utf8');
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
    expect(head).not.toMatch(/^(Bcc|X-Injected):/im);
    const mail = await simpleParser(rendered.raw);
    expect(mail.headers.has('bcc')).toBe(false);
    expect(mail.headers.has('x-injected')).toBe(false);
    expect(mail.headers.get('x-campaign')).toBe('nov');
    expect(mail.subject).toBe('Hi Ann');
    // The payload arrived as body text, so the checks above mean something.
    expect(mail.text).toContain('Bcc: victim@evil.test');
    expect(mail.bcc).toBeUndefined();
    expect(rendered.envelopeFrom).toBe(`bounces+verp-token@bounce.example.net`);
    expect((mail.to && !Array.isArray(mail.to) ? mail.to.value : []).map((v) => v.address)).toEqual([
      'ann@example.com',
    ]);
    expect(mail.html || '').not.toContain('<Bcc');
  });
});

describe('HTTP responses cannot be split', () => {
  it('an encoded CRLF in a dashboard path does not reach the redirect', async () => {
    for (const url of [
      `/messages/${newId()}%0d%0aSet-Cookie:%20pwned=1`,
      '/settings/webhooks%0d%0aLocation:%20https://evil.example',
    ]) {
      const res = await ctx.app.inject({ method: 'GET', url });
      expect([302, 404]).toContain(res.statusCode);
      const location = String(res.headers.location ?? '');
      expect(location).not.toMatch(/[\r\n]/);
      expect(location === '' || location.startsWith('/login?next=%2F')).toBe(true);
      expect(String(res.headers['set-cookie'] ?? '')).not.toContain('pwned');
    }
  });
});
