/**
 * fast-check arbitraries for bad input: nasty strings and values (control characters, broken
 * UTF-16, injections, boundary lengths, huge numbers, deep nesting), values that look right for
 * a field (addresses, URLs, dates, ids) so that service logic behind validation runs, query
 * strings and header values. Schema-driven bodies: schema-arb.ts.
 */
import fc from 'fast-check';

// ---- strings and values that break naive code ---------------------------------------------------

/** Lengths just around every limit the API has (1, 64, 200, 253, 255, 320, 998, 1024, 2048, 4096). */
export const BOUNDARY_LENGTHS = [
  0, 1, 2, 63, 64, 65, 199, 200, 201, 253, 254, 255, 256, 320, 321, 998, 999, 1024, 1025, 2048, 2049, 4097,
];

const NASTY_CONSTANTS = [
  '',
  ' ',
  '\t',
  '\r\n',
  '\n',
  '\r',
  '\0',
  'a\0b',
  'x\r\nBcc: victim@example.net',
  'x\nSubject: injected',
  '\ud800',
  'a\udfffb',
  '\u202e\u0644\u0627',
  '\ufeffbom',
  '\u00a0',
  'Z\u0351\u0362\u036b',
  '\u{1f600}\u{1f469}\u200d\u{1f4bb}',
  '\u2028\u2029',
  '%00%0d%0a',
  '%s%n%x',
  '../../../etc/passwd',
  "'; DROP TABLE messages; --",
  '<script>alert(1)</script>',
  '{{first}}{{#each x}}{{/each}}',
  '=?utf-8?B?AAAA?=',
  '__proto__',
  'constructor',
  'null',
  'NaN',
  '-0',
  '1e999',
  'a@b',
  '@',
  'a@@example.com',
  '"quoted"@example.com',
  'ann@example.com',
  'Ann <ann@example.com>',
  '<>',
  'http://127.0.0.1:9/hook',
  'https://[::1]/',
  'javascript:alert(1)',
  'example.com',
  '.',
  'xn--',
  '2026-11-22T10:00:00Z',
  '0000-00-00T00:00:00Z',
  '+275760-09-13T00:00:00.001Z',
  '01a2fe00-0000-7000-8000-000000000000',
  '*',
  'message.delivered',
];

/** Stands for an array nested 20,000 levels deep; toJson() writes it out (no JS value can hold it). */
export const DEEP = '\u0001deep\u0001';
const DEEP_JSON = JSON.stringify(DEEP);
const DEEP_TEXT = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;

/** JSON text of a generated value, DEEP expanded. */
export function toJson(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.includes(DEEP_JSON) ? text.split(DEEP_JSON).join(DEEP_TEXT) : text;
}

/** Strings that are each somebody's bug: control characters, surrogates, RTL, injections. */
export const nastyString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...NASTY_CONSTANTS), weight: 3 },
  {
    // Control characters and broken UTF-16 inside otherwise ordinary text.
    arbitrary: fc
      .tuple(
        fc.string({ maxLength: 6 }),
        fc.constantFrom(
          '\0',
          '\r\n',
          '\n',
          '\r',
          '\u0001',
          '\u001b[31m',
          '\u007f',
          '\ud800',
          '\udc00',
          '\u0085',
          '\u2028',
        ),
        fc.string({ maxLength: 6 }),
      )
      .map(([a, c, b]) => `${a}${c}${b}`),
    weight: 3,
  },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 24 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 24 }), weight: 2 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }), weight: 1 },
  { arbitrary: fc.string({ maxLength: 24 }), weight: 1 },
  {
    arbitrary: fc
      .tuple(fc.constantFrom('a', '\u00e9', '\u{1f600}', ' ', '\r\n'), fc.constantFrom(...BOUNDARY_LENGTHS))
      .map(([c, n]) => c.repeat(n)),
    weight: 1,
  },
);

const nastyNumber: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    0.5,
    999,
    1000,
    1001,
    59_999,
    60_000,
    60_001,
    2 ** 31,
    -(2 ** 31) - 1,
    2 ** 53 + 2,
    -(2 ** 53) - 2,
    1e21,
    1e308,
    -1e308,
    5e-324,
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Any JSON value, often of the wrong kind for where it lands. */
export const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  {
    arbitrary: fc.constantFrom(null, true, false, [], {}, [null], { '': null }, [[[]]], { a: { b: { c: {} } } }),
    weight: 3,
  },
  { arbitrary: nastyString, weight: 4 },
  { arbitrary: nastyNumber, weight: 3 },
  { arbitrary: fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }), weight: 2 },
  { arbitrary: fc.constantFrom(70, 200).map((n) => nest(n, 'x')), weight: 1 },
  { arbitrary: fc.constant(DEEP), weight: 1 },
);

/** `[[[...value...]]]`, `depth` levels deep. */
export function nest(depth: number, value: unknown): unknown {
  let v = value;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { k: v };
  return v;
}

// ---- values that look right for a field, so the service logic behind validation runs ----------

export const local = fc.stringMatching(/^[a-z0-9][a-z0-9._+-]{0,12}$/);
export const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/);
export const domainLike = fc.oneof(
  fc.tuple(label, fc.constantFrom('example.com', 'example.test', 'mail.example.org')).map(([l, d]) => `${l}.${d}`),
  fc.constantFrom('EXAMPLE.COM', 'example.com.', 'xn--bcher-kva.example', 'a..b', '-a.com', 'localhost', '[127.0.0.1]'),
);
export const emailLike = fc.oneof(
  { arbitrary: fc.tuple(local, domainLike).map(([l, d]) => `${l}@${d}`), weight: 4 },
  { arbitrary: fc.constantFrom('Ann@Example.COM', ' ann@example.com ', 'ann@[127.0.0.1]', 'a@b.c'), weight: 1 },
  { arbitrary: nastyString, weight: 1 },
);
export const mailboxLike = fc.oneof(
  emailLike,
  fc.tuple(fc.string({ unit: 'grapheme', maxLength: 12 }), emailLike).map(([n, e]) => `${n} <${e}>`),
  fc.constantFrom('"Shop, Inc." <shop@example.com>', '=?utf-8?Q?Caf=C3=A9?= <cafe@example.com>', 'a <b@c.d> <e@f.g>'),
);
export const urlLike = fc.oneof(
  fc.constantFrom(
    'http://127.0.0.1:9/hook',
    'https://127.0.0.1:9/x?y=1#z',
    'http://[::1]:9/',
    'http://user:pass@127.0.0.1:9/',
    'ftp://127.0.0.1/',
    'http://169.254.169.254/latest/meta-data',
    'http://0x7f000001:9/',
    'http://127.1:9/',
    'http:/x',
    'http://',
  ),
  fc
    .tuple(fc.constantFrom('http', 'https', 'HTTP'), fc.string({ unit: 'binary-ascii', maxLength: 30 }))
    .map(([s, rest]) => `${s}://${rest}`),
);
export const base64Like = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString('base64')),
  fc.constantFrom('', '=', 'A', 'AAA', 'A===', '####', 'SGVsbG8=\r\n', 'data:text/plain;base64,SGk='),
);
export const dateLike = fc.oneof(
  fc.date({ min: new Date(0), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.constantFrom(
    '2026-11-22',
    '2026-02-30T10:00:00Z',
    '2026-11-22T25:61:61Z',
    'yesterday',
    '1',
    '-1',
    '99999-01-01T00:00:00Z',
  ),
);
export const eventTypeLike = fc.constantFrom(
  '*',
  'message.delivered',
  'message.bounced',
  'message.*',
  'webhook.test',
  'MESSAGE.DELIVERED',
  'message.accepted,message.failed',
  '',
);
export const headerNameLike = fc.oneof(
  fc.constantFrom(
    'X-Campaign',
    'x-tag',
    'Subject',
    'From',
    'Bcc',
    'DKIM-Signature',
    'Content-Type',
    'X Bad',
    'X:Y',
    '',
  ),
  fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/),
);
export const idLike = fc.oneof(fc.uuid(), fc.constantFrom('', '0', 'x'.repeat(64), 'x'.repeat(65)), nastyString);

// ---- query strings and headers -----------------------------------------------------------------

/** Percent-encodes the UTF-8 bytes of `s` (lone surrogates become U+FFFD, as in any client). */
export function pct(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** A raw query string (without "?") mixing the route's parameters with junk, sometimes badly encoded. */
export function queryString(paramNames: string[]): fc.Arbitrary<string> {
  const key = fc.oneof(
    fc.constantFrom(...paramNames, 'limit', 'cursor', '__proto__', '__proto__[x]', 'a[b]', 'constructor', ''),
    fc.string({ unit: 'binary-ascii', maxLength: 8 }),
  );
  const value = fc.oneof(
    nastyString,
    fc.constantFrom('0', '-1', '1', '1000', '1001', '1.5', '1e3', '0x10', 'true', '', '%', '%zz', '%E0%A4%A', '%00'),
    fc.integer().map(String),
    idLike,
    dateLike,
  );
  const pair = fc
    .tuple(key, value, fc.boolean())
    .map(([k, v, encode]) => (encode ? `${pct(k)}=${pct(v)}` : `${k}=${v.replace(/[#\s]/g, '+')}`));
  return fc.array(pair, { maxLength: 5 }).map((pairs) => pairs.join('&'));
}

/** A header value as an HTTP client can send it (visible ASCII, space, tab and obs-text). */
export const headerValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({
    unit: fc
      .integer({ min: 0x20, max: 0xff })
      .filter((c) => c !== 0x7f)
      .map((c) => String.fromCharCode(c)),
    maxLength: 40,
  }),
  fc.constantFrom('', ' ', '\t', 'x'.repeat(256), 'x'.repeat(8000), '\u00e9\u00ff'),
);
