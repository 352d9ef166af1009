import { simpleParser } from 'mailparser';
import { describe, expect, it } from 'vitest';
import { buildMessage } from './mime.ts';

const base = {
  from: 'Shop <shop@mail.example.com>',
  to: { email: 'ann@example.net' },
  subject: 'Hello',
  messageId: '0193a1b2-test@mail.example.com',
  date: new Date('2026-11-22T10:00:00Z'),
};

/** Content-Type of the top node and of each leaf, in order, read from the raw MIME. */
function structure(raw: Buffer): string[] {
  return [...raw.toString('latin1').matchAll(/^Content-Type:\s*([^;\r\n]+)/gim)].map((m) => (m[1] ?? '').toLowerCase());
}

describe('buildMessage', () => {
  it('builds a text-only message with the identity headers', async () => {
    const raw = await buildMessage({ ...base, text: 'Plain body' });
    expect(structure(raw)).toEqual(['text/plain']);
    const mail = await simpleParser(raw);
    expect(mail.text?.trim()).toBe('Plain body');
    expect(mail.html).toBe(false);
    expect(mail.messageId).toBe('<0193a1b2-test@mail.example.com>');
    expect(mail.date?.toISOString()).toBe('2026-11-22T10:00:00.000Z');
    expect(mail.from?.value[0]).toMatchObject({ name: 'Shop', address: 'shop@mail.example.com' });
    expect(raw.toString('latin1')).toMatch(/^MIME-Version: 1\.0\r$/m);
    expect(raw.toString('latin1')).not.toMatch(/[^\r]\n/); // CRLF only
  });

  it('builds an html-only message', async () => {
    const raw = await buildMessage({ ...base, html: '<p>Hi</p>' });
    expect(structure(raw)).toEqual(['text/html']);
    expect((await simpleParser(raw)).html).toContain('<p>Hi</p>');
  });

  it("writes a group message's To and Cc lists as given; names with control characters are cleaned", async () => {
    const raw = await buildMessage({
      ...base,
      text: 'Hi',
      to: [
        { email: 'ann@example.net', name: 'Ann Lee' },
        { email: 'bob@example.net', name: null },
      ],
      cc: [{ email: 'carl@example.net', name: 'Carl\r\nBcc: x@evil.test' }],
    });
    const head = raw.toString('latin1').split('\r\n\r\n')[0] ?? '';
    expect(head).toMatch(/^To: Ann Lee <ann@example\.net>, bob@example\.net\r?$/m);
    expect(head).not.toMatch(/^bcc:/im);
    const mail = await simpleParser(raw);
    const cc = Array.isArray(mail.cc) ? mail.cc[0] : mail.cc;
    expect(cc?.value).toEqual([{ address: 'carl@example.net', name: 'Carl Bcc: x@evil.test' }]);
  });

  it('puts attachments with a cid beside the html in multipart/related, inline', async () => {
    const raw = await buildMessage({
      ...base,
      text: 'Hi',
      html: '<img src="cid:logo">',
      attachments: [
        { filename: 'logo.png', contentType: 'image/png', content: Buffer.from('png'), cid: 'logo' },
        { filename: 'a.pdf', contentType: 'application/pdf', content: Buffer.from('pdf') },
      ],
    });
    expect(structure(raw)).toEqual([
      'multipart/mixed',
      'multipart/alternative',
      'text/plain',
      'multipart/related',
      'text/html',
      'image/png',
      'application/pdf',
    ]);
    expect(raw.toString('latin1')).toMatch(/^Content-Id: <logo>\r$/im);
    const mail = await simpleParser(raw);
    expect(mail.attachments.map((a) => [a.filename, a.contentDisposition, a.related ?? false])).toEqual([
      ['logo.png', 'inline', true],
      ['a.pdf', 'attachment', false],
    ]);
  });

  it('builds multipart/alternative for text + html', async () => {
    const raw = await buildMessage({ ...base, text: 'Hi', html: '<b>Hi</b>' });
    expect(structure(raw)).toEqual(['multipart/alternative', 'text/plain', 'text/html']);
    const mail = await simpleParser(raw);
    expect(mail.text?.trim()).toBe('Hi');
    expect(mail.html).toContain('<b>Hi</b>');
  });

  it('wraps alternative and attachments in multipart/mixed', async () => {
    const pdf = Buffer.from('%PDF-1.4 fake \x00\x01\x02 bytes', 'latin1');
    const raw = await buildMessage({
      ...base,
      text: 'See attached',
      html: '<p>See attached</p>',
      attachments: [
        { filename: 'invoice.pdf', contentType: 'application/pdf', content: pdf },
        { filename: 'Übersicht.txt', contentType: 'text/plain', content: Buffer.from('zwei') },
      ],
    });
    expect(structure(raw).slice(0, 4)).toEqual(['multipart/mixed', 'multipart/alternative', 'text/plain', 'text/html']);
    const mail = await simpleParser(raw);
    expect(mail.attachments).toHaveLength(2);
    expect(mail.attachments[0]).toMatchObject({ filename: 'invoice.pdf', contentType: 'application/pdf' });
    expect(mail.attachments[0]?.content.equals(pdf)).toBe(true);
    expect(mail.attachments[1]?.filename).toBe('Übersicht.txt');
    expect(mail.html).toContain('See attached');
  });

  it('encodes UTF-8 subject and display names (RFC 2047) and round-trips them', async () => {
    const raw = await buildMessage({
      ...base,
      from: 'Café Zürich <info@mail.example.com>',
      to: { email: 'anna@example.net', name: 'Ánna Ørsted' },
      subject: 'Grüße aus Zürich – 你好 🎉',
      text: 'Hej då ✓',
    });
    const head = raw.toString('latin1').split('\r\n\r\n')[0] ?? '';
    expect(head).not.toMatch(/[^\t\r\n -~]/); // headers are pure printable ASCII on the wire
    expect(head).toMatch(/=\?UTF-8\?[BQ]\?/i);
    const mail = await simpleParser(raw);
    expect(mail.subject).toBe('Grüße aus Zürich – 你好 🎉');
    expect(mail.from?.value[0]).toMatchObject({ name: 'Café Zürich', address: 'info@mail.example.com' });
    const to = Array.isArray(mail.to) ? mail.to[0] : mail.to;
    expect(to?.value[0]).toMatchObject({ name: 'Ánna Ørsted', address: 'anna@example.net' });
    expect(mail.text?.trim()).toBe('Hej då ✓');
  });

  it('adds custom headers, Reply-To and List-Unsubscribe but drops reserved ones', async () => {
    const raw = await buildMessage({
      ...base,
      text: 'x',
      replyTo: 'help@example.com',
      headers: { 'X-Campaign': 'nov', 'Content-Type': 'text/evil', 'DKIM-Signature': 'forged', 'Bad Name': 'x' },
      listUnsubscribe: '<https://t.example.com/u/abc>, <mailto:unsub@example.com?subject=abc>',
      listUnsubscribeOneClick: true,
    });
    const mail = await simpleParser(raw);
    expect(mail.headers.get('x-campaign')).toBe('nov');
    expect(mail.replyTo?.value[0]?.address).toBe('help@example.com');
    expect(raw.toString()).toContain('List-Unsubscribe: <https://t.example.com/u/abc>,');
    expect(raw.toString()).toContain('List-Unsubscribe-Post: List-Unsubscribe=One-Click');
    expect(raw.toString()).not.toContain('text/evil');
    expect(raw.toString()).not.toContain('forged');
    expect(raw.toString()).not.toContain('Bad Name');
  });

  it('neutralizes header injection in custom header values', async () => {
    const raw = await buildMessage({ ...base, text: 'x', headers: { 'X-Note': 'a\r\nBcc: victim@example.org' } });
    expect(raw.toString()).not.toMatch(/^Bcc:/m);
  });
});
