/**
 * SMTP fuzzing pieces: a session runner that writes arbitrary bytes (split into arbitrary TCP
 * writes) to the submission server and collects every reply until the server closes, the check
 * every transcript must pass, and generators for command lines and message data.
 */
import net from 'node:net';
import fc from 'fast-check';
import { nastyString, toJson } from './arbitraries.ts';
import { nearValid, type Schema } from './schema-arb.ts';

export interface Session {
  /** Reply lines, in order (up to a STARTTLS handshake, after which the bytes are TLS). */
  lines: string[];
  closedByServer: boolean;
}

/** Ends any state the script left the server in: a message, an AUTH LOGIN exchange, a command. */
const TERMINATOR = Buffer.from('\r\n.\r\nQUIT\r\n');

/**
 * Connects, waits for the greeting, writes `script` in pieces cut at `cuts` (fractions of its
 * length), then TERMINATOR, and reads until the server closes. `giveUpMs` is a safety net.
 */
export function runSession(port: number, script: Buffer, cuts: number[] = [], giveUpMs = 20_000): Promise<Session> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', noDelay: true });
    const received: Buffer[] = [];
    let done = false;
    let started = false;
    const finish = (byServer: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ lines: replyLines(Buffer.concat(received).toString('latin1')), closedByServer: byServer });
    };
    const timer = setTimeout(() => finish(false), giveUpMs);
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('data', (d) => {
      received.push(d);
      if (started || !Buffer.concat(received).includes('\r\n')) return;
      started = true;
      void writeAll();
    });
    async function writeAll() {
      const points = [...new Set(cuts.map((c) => Math.floor(c * script.length)))].sort((a, b) => a - b);
      let at = 0;
      for (const p of [...points, script.length]) {
        if (p <= at) continue;
        if (done) return;
        socket.write(script.subarray(at, p));
        at = p;
        await new Promise((r) => setImmediate(r));
      }
      if (!done) socket.write(TERMINATOR);
    }
  });
}

function replyLines(text: string): string[] {
  const lines: string[] = [];
  for (const line of text.split('\r\n')) {
    if (line === '') continue;
    lines.push(line);
    // After "220 ... TLS" the client should start a handshake; what follows is not SMTP text.
    if (/^220 .*TLS/i.test(line)) break;
  }
  return lines;
}

/** Allowed reply codes: those docs/smtp.md lists and the standard ones smtp-server uses. */
const CODE =
  /^(2(11|14|20|21|35|50|51|52)|334|354|4(21|50|51|52|54)|5(00|01|02|03|04|21|30|34|35|38|50|51|52|53|54|55))[ -]/;

/**
 * Throws unless every reply line is a well-formed SMTP reply with a known code, no reply is the
 * catch-all of an unexpected exception (`451 4.3.0 Temporary local problem`), and the session
 * ended the proper way (221 after QUIT, 421 closing, or a STARTTLS the script never completed).
 */
export function checkSession(s: Session, what: string): void {
  const fail = (why: string) => {
    throw new Error(`${why}\nscript: ${what.slice(0, 600)}\nreplies:\n${s.lines.join('\n').slice(0, 2000)}`);
  };
  if (!s.closedByServer) fail('the server did not end the session');
  if (!s.lines[0]?.startsWith('220 ')) fail('no greeting');
  for (const line of s.lines) {
    if (!CODE.test(line)) fail(`not a proper SMTP reply: ${JSON.stringify(line.slice(0, 200))}`);
    if (/^451 4\.3\.0 Temporary local problem/.test(line)) fail('an unexpected error inside the server');
  }
  const last = s.lines[s.lines.length - 1] ?? '';
  if (!/^(221|421) /.test(last) && !/^220 .*TLS/i.test(last)) fail(`the session ended without 221/421: ${last}`);
}

// ---- generators ------------------------------------------------------------------------------

export interface Creds {
  username: string;
  password: string;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const okAddr = fc.constantFrom('shop@example.com', 'ann@example.com', 'bob@example.org');
const anyAddr = fc.oneof(
  okAddr,
  nastyString,
  fc.constantFrom(
    '',
    '<>',
    'a@b',
    '"x y"@example.com',
    'postmaster',
    '@a,@b:c@example.com',
    'a@[127.0.0.1]',
    'ü@example.com',
    'a@-x.com',
  ),
);
const mailParam = fc.constantFrom(
  '',
  ' SIZE=100',
  ' SIZE=99999999999999999999',
  ' SIZE=-1',
  ' SIZE=abc',
  ' SIZE=',
  ' BODY=8BITMIME',
  ' BODY=BINARYMIME',
  ' SMTPUTF8',
  ' RET=FULL ENVID=x',
  ' NOTIFY=NEVER',
  ' AUTH=<>',
  ' X=Y Z',
  ' =',
);
const junkLine = fc.oneof(
  fc.string({ unit: 'binary-ascii', maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom(4090, 5000, 70_000).map((n) => `NOOP ${'a'.repeat(n)}`),
);

/** One command line (without its line ending): well-formed, almost, or junk. */
export function commandLine(creds: Creds): fc.Arbitrary<string> {
  const goodPlain = `AUTH PLAIN ${b64(`\0${creds.username}\0${creds.password}`)}`;
  return fc.oneof(
    fc
      .tuple(fc.constantFrom('EHLO', 'HELO', 'ehlo', 'LHLO'), fc.oneof(fc.constant('client.test'), nastyString))
      .map(([c, h]) => `${c} ${h}`),
    fc.constantFrom(
      goodPlain,
      'AUTH LOGIN',
      b64(creds.username),
      b64(creds.password),
      'AUTH PLAIN',
      'AUTH PLAIN =',
      'AUTH PLAIN ****',
      `AUTH PLAIN ${b64(`${creds.username}\0${creds.password}`)}`,
      `AUTH PLAIN ${b64('\0\0')}`,
      `AUTH PLAIN ${b64(`\0${creds.username}\0wrong`)}`,
      `AUTH PLAIN ${Buffer.from([0, 0xff, 0xfe, 0, 0xc3]).toString('base64')}`,
      'AUTH LOGIN dXNlcg==',
      'AUTH CRAM-MD5',
      'AUTH XOAUTH2 abc',
      '*',
      'DATA',
      'RSET',
      'NOOP',
      'HELP',
      'VRFY postmaster',
      'EXPN list',
      'BDAT 10 LAST',
      'XCLIENT ADDR=1.2.3.4',
      'XFORWARD NAME=x',
      'STARTTLS',
      'STARTTLS extra',
      '.',
      '',
    ),
    fc.tuple(fc.constantFrom('AUTH PLAIN ', 'AUTH LOGIN ', 'AUTH '), nastyString).map(([a, s]) => `${a}${b64(s)}`),
    fc.tuple(anyAddr, mailParam).map(([a, p]) => `MAIL FROM:<${a}>${p}`),
    fc.tuple(anyAddr, mailParam).map(([a, p]) => `RCPT TO:<${a}>${p}`),
    fc
      .tuple(fc.constantFrom('MAIL FROM:', 'MAIL FROM: ', 'RCPT TO:', 'rcpt to: ', 'MAIL'), anyAddr)
      .map(([c, a]) => `${c}${a}`),
    junkLine,
  );
}

const lineEnd = fc.oneof(
  { arbitrary: fc.constant('\r\n'), weight: 8 },
  { arbitrary: fc.constantFrom('\n', '\r', '\r\r\n', '\n\r', ''), weight: 2 },
);

/** A session script: optionally a well-behaved start (EHLO, AUTH, MAIL, RCPT), then anything. */
export function commandScript(creds: Creds): fc.Arbitrary<Buffer> {
  const prefix = fc.constantFrom(
    '',
    'EHLO client.test\r\n',
    `EHLO client.test\r\nAUTH PLAIN ${b64(`\0${creds.username}\0${creds.password}`)}\r\n`,
    `EHLO client.test\r\nAUTH PLAIN ${b64(`\0${creds.username}\0${creds.password}`)}\r\nMAIL FROM:<shop@example.com>\r\nRCPT TO:<ann@example.com>\r\n`,
  );
  const step = fc.tuple(commandLine(creds), lineEnd).map(([l, e]) => `${l}${e}`);
  return fc
    .tuple(prefix, fc.array(step, { minLength: 1, maxLength: 8 }))
    .map(([p, steps]) => Buffer.from(`${p}${steps.join('')}`, 'utf8'));
}

// ---- message data ----------------------------------------------------------------------------

const OPTIONS_SCHEMA: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    tags: { type: 'array', maxItems: 10, items: { type: 'string', minLength: 1, maxLength: 64 } },
    metadata: { type: 'object', maxProperties: 50, additionalProperties: { type: 'string', maxLength: 100 } },
    mail_type: { enum: ['transactional', 'marketing', ''] },
    idempotency_key: { type: 'string', maxLength: 255 },
  },
};

const headerLine: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'From: Shop <shop@example.com>',
    'From: shop@example.com',
    'From:',
    'From: <>',
    'From: a@example.com, b@example.com',
    'From: =?utf-8?B?U2hvcA==?= <shop@example.com>',
    'From: =?utf-8?Q?=00=0D=0A?= <shop@example.com>',
    'From: "\0" <shop@example.com>',
    'From: undisclosed-recipients:;',
    'To: ann@example.com',
    'Subject: =?utf-8?Q?=00=0D=0ABcc:_x@example.com?=',
    'Subject: =?bogus?X?abc?=',
    'Subject: =?utf-8?B?****?=',
    'Content-Type: multipart/mixed; boundary="b"',
    'Content-Type: multipart/alternative',
    'Content-Type: text/plain; charset=bogus',
    'Content-Transfer-Encoding: base64',
    'Content-Transfer-Encoding: quoted-printable',
    'Bcc: hidden@example.com',
    'Date: not a date',
    'Message-ID: <>',
    'X-Folded: a\r\n\tb\r\n c',
    'NoColonHere',
    ' leading-whitespace: x',
    ': empty-name',
    'X-Postyard-Options: {',
    'X-Postyard-Options: null',
    'X-Postyard-Options: =?utf-8?B?e30=?=',
  ),
  fc.tuple(fc.constantFrom('From', 'Subject', 'Reply-To', 'To', 'X-Any'), nastyString).map(([n, v]) => `${n}: ${v}`),
  nearValid(OPTIONS_SCHEMA).map((o) => `X-Postyard-Options: ${toJson(o)}`),
  fc.constantFrom(1000, 20_000, 200_000).map((n) => `X-Huge: ${'a'.repeat(n)}`),
  fc.constantFrom(100, 2000).map((n) => Array.from({ length: n }, (_, i) => `X-Many-${i}: v`).join('\r\n')),
);

const body: fc.Arbitrary<Buffer> = fc.oneof(
  fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
  fc
    .constantFrom(
      'line\nbare LF\rbare CR\r\n..dot\r\n.\r\nafter the end\r\n',
      '--b\r\nContent-Type: text/plain\r\n\r\npart\r\n--b--\r\n',
      '--b\r\n\r\nunterminated',
      '=\r\n=ZZ=\r\n',
      '\0\0\0',
      `${'x'.repeat(2000)}\r\n`,
    )
    .map((s) => Buffer.from(s, 'latin1')),
);

/** Message data (before the terminating dot): headers, a separator (or none) and a body. */
export const messageData: fc.Arbitrary<Buffer> = fc
  .tuple(fc.array(headerLine, { maxLength: 6 }), fc.constantFrom('\r\n\r\n', '\n\n', '\r\n', ''), body, fc.boolean())
  .map(([headers, sep, b, from]) =>
    Buffer.concat([
      Buffer.from([...(from ? ['From: Shop <shop@example.com>'] : []), ...headers].join('\r\n'), 'utf8'),
      Buffer.from(sep),
      b,
    ]),
  );
