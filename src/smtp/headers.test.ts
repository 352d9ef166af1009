/** Byte-exact header splicing of submitted messages (src/smtp/headers.ts). */
import { describe, expect, it } from 'vitest';
import { MalformedMessageError, parseHeaders, rewriteMessage } from './headers.ts';
import { parseOptions } from './options.ts';
import { decodeHeader } from './submission.ts';

const strip = (raw: string, add: string[] = []) => {
  const buf = Buffer.from(raw, 'utf8');
  const h = parseHeaders(buf);
  return rewriteMessage(buf, h, (f) => f.name === 'bcc' || f.name === 'x-postyard-options', add).toString('utf8');
};

describe('parseHeaders / rewriteMessage', () => {
  it('unfolds values, keeps every other byte, handles CRLF and bare LF', () => {
    for (const eol of ['\r\n', '\n']) {
      const raw = [
        'From: a@example.com',
        'Bcc: x@example.com,',
        '\ty@example.com',
        'Subject: Hi',
        '  there',
        '',
        'Body',
        'Bcc: not a header',
        '',
      ].join(eol);
      const h = parseHeaders(Buffer.from(raw));
      expect(h.eol).toBe(eol);
      expect(h.fields.map((f) => [f.name, f.value])).toEqual([
        ['from', 'a@example.com'],
        ['bcc', 'x@example.com,\ty@example.com'],
        ['subject', 'Hi  there'],
      ]);
      expect(strip(raw)).toBe(
        ['From: a@example.com', 'Subject: Hi', '  there', '', 'Body', 'Bcc: not a header', ''].join(eol),
      );
    }
  });

  it('removes a last field and appends new ones before the body', () => {
    expect(strip('From: a@example.com\r\nBcc: b@example.com\r\n\r\nBody\r\n', ['Date: x'])).toBe(
      'From: a@example.com\r\nDate: x\r\n\r\nBody\r\n',
    );
    // A message that is only headers, without a final line break.
    expect(strip('From: a@example.com', ['Date: x'])).toBe('From: a@example.com\r\nDate: x\r\n');
  });

  it('reads 8-bit header values as UTF-8 and leaves their bytes alone', () => {
    const raw = 'From: Zoë <z@example.com>\r\nSubject: Grüße\r\n\r\nx\r\n';
    expect(parseHeaders(Buffer.from(raw)).fields.map((f) => f.value)).toEqual(['Zoë <z@example.com>', 'Grüße']);
    expect(strip(raw)).toBe(raw);
  });

  it('refuses lines that are not header fields', () => {
    expect(() => parseHeaders(Buffer.from(' folded first\r\nFrom: a@example.com\r\n\r\n'))).toThrow(
      MalformedMessageError,
    );
    expect(() => parseHeaders(Buffer.from('From a@example.com Sat Jan 3\r\n\r\n'))).toThrow(MalformedMessageError);
    expect(() => parseHeaders(Buffer.from('Bad Name: x\r\n\r\n'))).toThrow(MalformedMessageError);
  });

  it('only decodes the header section of a large message', () => {
    const body = 'Not: a header\r\n'.repeat(100_000);
    const h = parseHeaders(Buffer.from(`From: a@example.com\r\n\r\n${body}`));
    expect(h.fields).toHaveLength(1);
    expect(h.headerEnd).toBe('From: a@example.com\r\n'.length);
  });
});

describe('X-Postyard-Options', () => {
  it('accepts the documented fields, empty strings meaning "default"', () => {
    expect(parseOptions('{"tags":["a","a","b"],"metadata":{"k":"v"},"mail_type":"","idempotency_key":""}')).toEqual({
      tags: ['a', 'b'],
      metadata: { k: 'v' },
      mailType: 'transactional',
      idempotencyKey: undefined,
      templateId: undefined,
      useDraft: false,
      substitutionData: undefined,
    });
    expect(parseOptions(undefined)).toMatchObject({ tags: [], mailType: 'transactional' });
  });

  it('decodes RFC 2047 encoded words, as nodemailer writes long header values', () => {
    const encoded =
      '=?UTF-8?Q?=7B=22tags=22=3A=5B=22receipt=22=5D=2C?= =?UTF-8?Q?=22mail=5Ftype=22=3A=22marketing=22=7D?=';
    expect(parseOptions(decodeHeader(encoded))).toMatchObject({ tags: ['receipt'], mailType: 'marketing' });
  });

  it('refuses bad values with 550 5.6.0 naming the problem', () => {
    const cases: [string, RegExp][] = [
      ['[]', /must be a JSON object/],
      ['{"metadata":{"k":1}}', /metadata\.k must be a string/],
      ['{"idempotency_key":"é"}', /idempotency_key must be 1-255 printable ASCII/],
      ['{"tags":[""]}', /each tag must be a string of 1-64/],
      [
        `{"metadata":${JSON.stringify(Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])))}}`,
        /at most 50 keys/,
      ],
    ];
    for (const [value, message] of cases) {
      let err: unknown;
      try {
        parseOptions(value);
      } catch (e) {
        err = e;
      }
      expect(err, value).toMatchObject({ responseCode: 550 });
      expect((err as Error).message, value).toMatch(/^5\.6\.0 X-Postyard-Options: /);
      expect((err as Error).message, value).toMatch(message);
    }
  });
});
