/**
 * Adversarial inbound mail for test/fuzz/inbound-parsers.test.ts: every parser entry point that
 * mail to the inbound listener reaches, and generators of what makes parsing cost more than the
 * size of its input: long runs of address characters, many '@', runs of spaces and '=' in
 * quoted-printable, deep MIME nesting, huge and folded header lines, lone CRs, many parts,
 * repeated separators and boundaries, deep or unbalanced HTML, status groups with endless
 * continuation lines. Messages are also made from the corpus of real-looking reports
 * (test/inbound/corpus.ts) with such runs inserted.
 */
import fc from 'fast-check';
import { classifyBounce } from '../../src/modules/outcomes/bounce-rules.ts';
import {
  addressField,
  diagnosticText,
  parseFieldGroups,
  smtpFigures,
} from '../../src/modules/feedback/delivery-status.ts';
import {
  firstAddress,
  looksLikeAutoReply,
  looksLikeBounce,
  plainBounce,
} from '../../src/modules/feedback/heuristics.ts';
import { htmlNoticeText } from '../../src/modules/feedback/html-text.ts';
import {
  decodeBody,
  decodeQuotedPrintable,
  decodeSubject,
  headerFields,
  structuredValue,
  transferEncoding,
} from '../../src/modules/feedback/mime-decode.ts';
import { MAX_PARTS, SCAN_BYTES, walkMessage } from '../../src/modules/feedback/mime-walk.ts';
import { findReferences, parseInbound } from '../../src/modules/feedback/report-parser.ts';
import { VerpSigner, verpTokenOf } from '../../src/modules/outcomes/verp.ts';
import * as corpus from '../inbound/corpus.ts';

/** The size each generated message is cut to: the 64 KB the plain-text heuristics read. */
export const MAX_BYTES = 64 * 1024;

const signer = new VerpSigner(Buffer.alloc(32, 7));

/** The one error a parse may end with: too many parts (the listener counts such mail unmatched). */
const ALLOWED_ERROR = new RegExp(`^more than ${MAX_PARTS} MIME parts$`);

async function parse(raw: Buffer, walk: (raw: Buffer) => Promise<unknown>): Promise<unknown> {
  try {
    return await walk(raw);
  } catch (err) {
    if (ALLOWED_ERROR.test((err as Error).message)) return null;
    throw err;
  }
}

/** Each parser that inbound mail reaches, called directly on one input (message bytes, or their text). */
export const ENTRY_POINTS: Record<string, (raw: Buffer, text: string) => unknown> = {
  parseInbound: (raw) => parse(raw, parseInbound),
  walkMessage: (raw) =>
    parse(raw, async (r) => {
      const mail = await walkMessage(r);
      if (mail.text.length > SCAN_BYTES) throw new Error(`text of ${mail.text.length} characters`);
      return mail;
    }),
  plainBounce: (_raw, text) => plainBounce(text),
  firstAddress: (_raw, text) => firstAddress(text),
  looksLikeBounce: (_raw, text) => looksLikeBounce({ from: text, subject: text }, text),
  looksLikeAutoReply: (_raw, text) =>
    looksLikeAutoReply(
      new Map([
        ['auto-submitted', text],
        ['precedence', text],
      ]),
      text,
      text,
    ),
  parseFieldGroups: (_raw, text) => parseFieldGroups(text),
  smtpFigures: (_raw, text) => smtpFigures(text),
  addressField: (_raw, text) => [addressField(text), diagnosticText(text)],
  findReferences: (_raw, text) => findReferences(text),
  headerFields: (_raw, text) => headerFields(text.split(/(?<=\n)/)),
  structuredValue: (_raw, text) => structuredValue(text),
  transferEncoding: (_raw, text) => transferEncoding(text),
  decodeQuotedPrintable: (raw) => decodeQuotedPrintable(raw),
  decodeBody: (raw) => [decodeBody(raw, 'base64', 'iso-8859-2'), decodeBody(raw, 'quoted-printable', 'x-unknown')],
  decodeSubject: (_raw, text) => decodeSubject(text),
  htmlNoticeText: (_raw, text) => htmlNoticeText(text),
  // The delivery engine's rule table, on the diagnostic text a report gives.
  classifyBounce: (_raw, text) => {
    const f = smtpFigures(text);
    return classifyBounce({ code: f.code ?? 550, ...(f.enhanced ? { enhancedCode: f.enhanced } : {}), text });
  },
  verp: (_raw, text) => {
    const token = verpTokenOf(text);
    return [token, signer.verify(token ?? text)];
  },
};

/**
 * The pieces an attacker repeats. Each is known to make some pattern backtrack or some loop
 * rescan: address characters without '@', '@' runs, separators and boundaries, CR/LF mixes,
 * quoted-printable padding, MIME words, HTML nesting, status fields.
 */
const UNITS = [
  'a',
  '9',
  "a.-_%+'",
  'a@',
  '@',
  'a@a.',
  'x@y.zz ',
  '.',
  '-',
  '--',
  '-- ',
  '---- original message\r\n',
  ' ',
  '\t',
  '\r',
  '\n',
  '\r\n',
  '\n\r',
  '\r\r\n',
  '=',
  '= ',
  '=\r\n',
  '=3D',
  '=\t\r\n',
  '5',
  ' 550',
  '550-',
  '5.',
  ' 5.1.1',
  '(#5.1.1)',
  '(',
  ')',
  ':',
  ';',
  '"',
  '\\',
  'a:b\r\n',
  ' b\r\n',
  '\tb\r\n',
  'bounces+',
  `bounces+${'a'.repeat(99)}`,
  'message-id: <',
  'Message-ID: <6f1c2a3e-1111-4222-8333-944455556666@',
  '=?utf-8?q?',
  '=?utf-8?b?',
  '?=',
  '=?x?q?a?= ',
  '<',
  '<div>',
  '</div>',
  '</span>',
  '<pre>',
  '<!--',
  '<script>',
  '<a href="',
  '<table><tr><td>',
  '&amp',
  '&#',
  '&#x1F600;',
  'Action: failed\r\n',
  'Diagnostic-Code: smtp; 550 ',
  'Final-Recipient: rfc822; ',
  'Status: 5.0.0\r\n',
  '\r\n\r\n',
  '--b\r\n',
  '--b--\r\n',
  '--b\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n',
  '--b\r\nContent-Type: text/plain\r\n\r\nx\r\n',
  'Content-Type: text/plain; a*0*=x; ',
  'Content-Transfer-Encoding: quoted-printable\r\n',
  'user unknown ',
  'delivery delayed ',
  'received: from ',
  'out of office ',
];

/** How many times a unit is repeated: a few, or enough to fill the message. */
const count = fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1_000, max: MAX_BYTES }));

/** A run of one unit (or a short random string), up to MAX_BYTES. */
const run = fc
  .tuple(
    fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...UNITS) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 6 }) },
    ),
    count,
  )
  .map(([unit, n]) => unit.repeat(Math.min(n, Math.ceil(MAX_BYTES / unit.length))).slice(0, MAX_BYTES));

/** One to three runs after each other. */
export const blob = fc.array(run, { minLength: 1, maxLength: 3 }).map((runs) => runs.join('').slice(0, MAX_BYTES));

const FROM = ['MAILER-DAEMON@mx.dest.test', 'postmaster@dest.test', 'Ann <ann@dest.test>', ''];
const SUBJECT = ['Undelivered Mail Returned to Sender', 'Out of Office: Hello', 'Re: Hello', ''];
const TEXT_TYPE = [
  'text/plain',
  'text/plain; charset=iso-8859-1',
  'text/plain; charset=x-unknown',
  'text/html; charset=utf-8',
  'message/delivery-status',
  'message/rfc822',
];
const ENCODING = ['7bit', 'quoted-printable', 'base64', '(comment) base64', 'x-unknown'];

const headerBlock = (fields: [string, string][]) => fields.map(([k, v]) => `${k}: ${v}\r\n`).join('');

/** A notice of one part: plain text or HTML, in any transfer encoding (base64 encoded or not). */
const onePart = fc
  .record({
    from: fc.constantFrom(...FROM),
    subject: fc.oneof(fc.constantFrom(...SUBJECT), blob),
    type: fc.constantFrom(...TEXT_TYPE),
    encoding: fc.constantFrom(...ENCODING),
    encode: fc.boolean(),
    extra: fc.array(fc.tuple(fc.constantFrom('X-Long', 'Auto-Submitted', 'Precedence', 'Received'), blob), {
      maxLength: 2,
    }),
    body: blob,
  })
  .map(
    (m) =>
      headerBlock([
        ['From', m.from],
        ['Subject', m.subject],
        ...m.extra,
        ['Content-Type', m.type],
        ['Content-Transfer-Encoding', m.encoding],
      ]) +
      `\r\n${m.encode && m.encoding === 'base64' ? Buffer.from(m.body, 'latin1').toString('base64').replace(/.{76}/g, '$&\r\n') : m.body}\r\n`,
  );

/** A multipart/report: a text part, a status or feedback part and the returned message, each a blob. */
const report = fc
  .record({
    kind: fc.constantFrom('delivery-status', 'feedback-report'),
    text: blob,
    status: fc.oneof(
      blob,
      blob.map((b) => `Reporting-MTA: dns; x\r\n\r\nAction: failed\r\nDiagnostic-Code: smtp; ${b}`),
    ),
    returned: blob,
    closed: fc.boolean(),
  })
  .map(
    (r) =>
      `From: MAILER-DAEMON@mx.dest.test\r\nContent-Type: multipart/report; report-type=${r.kind}; boundary="r"\r\n\r\n` +
      `--r\r\nContent-Type: text/plain\r\n\r\n${r.text}\r\n` +
      `--r\r\nContent-Type: message/${r.kind === 'delivery-status' ? 'delivery-status' : 'feedback-report'}\r\n\r\n${r.status}\r\n` +
      `--r\r\nContent-Type: message/rfc822\r\n\r\n${r.returned}\r\n${r.closed ? '--r--\r\n' : ''}`,
  );

/** Multiparts nested in each other, up to past the part limit, with a blob at the bottom. */
const nested = fc
  .record({ depth: fc.integer({ min: 1, max: MAX_PARTS + 60 }), leaf: blob, sameBoundary: fc.boolean() })
  .map(
    ({ depth, leaf, sameBoundary }) =>
      `Subject: Undelivered Mail\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n${Array.from(
        { length: depth },
        (_, i) =>
          `--b${sameBoundary ? 0 : i}\r\nContent-Type: multipart/mixed; boundary=b${sameBoundary ? 0 : i + 1}\r\n\r\n`,
      ).join('')}--b${sameBoundary ? 0 : depth}\r\nContent-Type: text/plain\r\n\r\n${leaf}\r\n`,
  );

/** Many sibling parts, up to past the part limit, each a short run. */
const manyParts = fc
  .record({ parts: fc.integer({ min: 1, max: MAX_PARTS + 60 }), body: run.map((r) => r.slice(0, 200)) })
  .map(
    ({ parts, body }) =>
      `Content-Type: multipart/mixed; boundary=p\r\n\r\n${`--p\r\nContent-Type: text/plain\r\n\r\n${body}\r\n`.repeat(parts)}--p--\r\n`,
  );

/** A report of the corpus with a blob inserted somewhere (in a header, a boundary, a body). */
const original: corpus.Original = {
  envelopeFrom: `bounces+${signer.sign('6f1c2a3e-1111-4222-8333-944455556666')}@bounce.postyard.test`,
  recipient: 'ann@dest.test',
  messageId: '6f1c2a3e-1111-4222-8333-944455556666',
};
const SAMPLES = [
  corpus.postfixDsn(original),
  corpus.eximDsn(original),
  corpus.eximPlain(original),
  corpus.exchangeDsn(original),
  corpus.gmailPlain(original),
  corpus.qmailPlain(original),
  corpus.wordingOnly(original),
  corpus.yahooArf(original, 'fbl@bounce.postyard.test'),
  corpus.microsoftArf(original, 'fbl@bounce.postyard.test'),
  ...Object.values(corpus.AUTO_REPLIES).map((f) => f(original)),
];
const mutated = fc
  .record({ sample: fc.constantFrom(...SAMPLES), at: fc.nat(), insert: blob })
  .map(({ sample, at, insert }) => {
    const i = at % (sample.length + 1);
    return sample.slice(0, i) + insert + sample.slice(i);
  });

/** Line breaks as sent, or all LF, all CR, or CR and LF swapped. */
const lineEnds = fc.constantFrom(
  (s: string) => s,
  (s: string) => s.replaceAll('\r\n', '\n'),
  (s: string) => s.replaceAll('\r\n', '\r'),
  (s: string) => s.replaceAll('\r\n', '\n\r'),
);

/** An adversarial inbound message: its text (cut to MAX_BYTES) and how it is turned into bytes. */
export const inboundMessage = fc
  .tuple(
    fc.oneof(onePart, report, nested, manyParts, mutated, blob),
    lineEnds,
    fc.constantFrom('latin1', 'utf8') as fc.Arbitrary<BufferEncoding>,
  )
  .map(([message, ends, encoding]) => ({ message: ends(message).slice(0, MAX_BYTES), encoding }));
