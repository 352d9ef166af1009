/**
 * What reaches other mail servers (issue 13, items 3-5), through the default configuration
 * (render threads on): messages submitted over the API and over SMTP are delivered to a raw TCP
 * sink that records the exact DATA bytes, dot-stuffing included.
 *
 * - No bare CR or bare LF ever leaves (SMTP smuggling: `<CR>.<CR>`, `<LF>.<LF>` and the like
 *   are read as end-of-data by some receivers), and nothing after a message is read as a command.
 * - DKIM still verifies (the message is normalised before it is signed), with the independent
 *   verifier of test/peers/dkim-verifier.ts.
 * - One Date and one Message-ID on SMTP submissions; Resent-Bcc removed; NUL and raw 8-bit
 *   header bytes refused at submission; API header values leave RFC 2047-encoded.
 */
import libmime from 'libmime';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDkimKeyPair } from '../../src/modules/delivery/render/dkim.ts';
import { createDeliveryWorker } from '../../src/modules/delivery/engine.ts';
import type { DeliveryWorker } from '../../src/modules/delivery/worker.ts';
import { call } from '../helpers/context.ts';
import { type DkimVerifier, startDkimVerifier } from '../peers/dkim-verifier.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { type RawDataMessage, type RawDataSink, startRawDataSink } from '../peers/raw-data-sink.ts';
import { RawClient, queuedId, type SmtpSetup, setupSmtp } from '../smtp/helpers.ts';

let s: SmtpSetup;
let dnsServer: DnsServer;
let sink: RawDataSink;
let verifier: DkimVerifier;
let worker: DeliveryWorker;
let client: RawClient;
const keys = generateDkimKeyPair();

beforeAll(async () => {
  sink = await startRawDataSink();
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
  worker = createDeliveryWorker(s.ctx.c, 'outgoing-bytes-worker', {
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

const BARE_CR_OR_LF = /\r(?!\n)|(?<!\r)\n/;

/** The delivered message for `rcpt` (each test uses its own recipients). */
async function deliveredTo(rcpt: string): Promise<RawDataMessage> {
  const end = Date.now() + 20_000;
  for (;;) {
    const m = sink.messages.find((x) => x.rcptTo.includes(rcpt));
    if (m) return m;
    if (Date.now() > end) throw new Error(`nothing delivered to ${rcpt}; commands: ${sink.commands.join(' | ')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function headerSection(raw: Buffer): string {
  const text = raw.toString('latin1');
  return text.slice(0, text.indexOf('\r\n\r\n') + 2);
}

function expectCleanWire(m: RawDataMessage) {
  const wire = m.wire.toString('latin1');
  expect(wire, JSON.stringify(wire.slice(0, 3000))).not.toMatch(BARE_CR_OR_LF);
  expect(m.wire.includes(0)).toBe(false);
  // Nothing the message carried was taken for a command by the receiver.
  expect(sink.commands.filter((c) => /evil/i.test(c))).toEqual([]);
}

/** MAIL, RCPT, DATA on the ready session, then exactly `data` and the terminator. */
async function submitRaw(rcpt: string, data: Buffer | string): Promise<string> {
  expect(await client.cmd('MAIL FROM:<shop@example.com>')).toMatch(/^250/);
  expect(await client.cmd(`RCPT TO:<${rcpt}>`)).toMatch(/^250/);
  expect(await client.cmd('DATA')).toMatch(/^354/);
  client.write(Buffer.concat([Buffer.from(data), Buffer.from('\r\n.\r\n')]));
  return client.read();
}

const SMUGGLING_BODY =
  'one\r.\rMAIL FROM:<evil@dest.test>\rRCPT TO:<evil@dest.test>\rDATA\r' +
  'two\n.\nMAIL FROM:<evil2@dest.test>\n' +
  'three\r\n.\rQUIT\r\n' +
  'four\n.\r\nfive\r\r\n';

describe('API submission', () => {
  it('bare CR, bare LF and <CR>.<CR> in API bodies and attachments leave as CRLF lines only, DKIM pass', async () => {
    expect(s.ctx.c.config.renderThreads).toBeGreaterThanOrEqual(1);
    const inner = 'Subject: inner\r\rbody\r.\rRCPT TO:<evil3@dest.test>\n.\nend\u0000';
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: s.tenant.apiKey,
      body: {
        recipients: [{ email: 'api-bytes@dest.test' }],
        content: {
          subject: 'bytes',
          text: SMUGGLING_BODY,
          html: `<p>${SMUGGLING_BODY}</p>`,
          attachments: [
            { filename: 'fwd.eml', content_type: 'message/rfc822', data: Buffer.from(inner).toString('base64') },
          ],
        },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const m = await deliveredTo('api-bytes@dest.test');
    expectCleanWire(m);
    expect(await verifier.verify(m.message)).toBe('pass');
    const parsed = await simpleParser(m.message);
    // The content still arrives, as text of the message.
    expect(parsed.text).toContain('MAIL FROM:<evil@dest.test>');
    expect(parsed.text).toContain('five');
  });

  it('API header values leave as RFC 2047 encoded ASCII; a substituted subject carries no control characters', async () => {
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: s.tenant.apiKey,
      body: {
        recipients: [
          { email: 'api-headers@dest.test', name: 'Zoë Ünal', substitution_data: { s: 'a b' } },
          // Control characters from substitution_data never reach a header: that message fails.
          { email: 'api-headers-bad@dest.test', substitution_data: { s: 'a\u0007b\r\nBcc: evil@x.test' } },
        ],
        content: {
          from: 'Grüße Shop <shop@example.com>',
          subject: 'Grüße {{s}}',
          text: 'x',
          headers: { 'X-Note': 'café' },
        },
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const m = await deliveredTo('api-headers@dest.test');
    expectCleanWire(m);
    const head = headerSection(m.message);
    // Printable ASCII, tab and CRLF only.
    expect(head).toMatch(/^[\x20-\x7e\t\r\n]*$/);
    expect(head).not.toMatch(/^bcc:/im);
    const parsed = await simpleParser(m.message);
    expect(parsed.subject).toMatch(/^Grüße a b/);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
    expect(parsed.subject).not.toMatch(/[\u0000-\u001f]/);
    // mailparser leaves unknown headers encoded.
    expect(libmime.decodeWords(String(parsed.headers.get('x-note')))).toBe('café');
    expect(parsed.to && 'value' in parsed.to ? parsed.to.value[0]?.name : '').toBe('Zoë Ünal');
    expect(await verifier.verify(m.message)).toBe('pass');
    const txId = (res.json() as { transmission_id: string }).transmission_id;
    for (let end = Date.now() + 20_000; ; ) {
      const bad = await s.ctx.c.database.db
        .selectFrom('messages')
        .select(['state', 'last_response'])
        .where('transmission_id', '=', txId)
        .where('recipient', '=', 'api-headers-bad@dest.test')
        .executeTakeFirstOrThrow();
      if (bad.state === 'failed') {
        expect(bad.last_response).toMatch(/^render_failed: subject: /);
        break;
      }
      if (Date.now() > end) throw new Error(`api-headers-bad@dest.test is still ${bad.state}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(sink.messages.some((x) => x.rcptTo.includes('api-headers-bad@dest.test'))).toBe(false);

    // NUL is refused anywhere in a request; other control characters in header values too.
    for (const value of ['a\u0000b', 'a\u0007b', 'a\r\nBcc: evil@x.test']) {
      const bad = await call(s.ctx.app, 'POST', '/v1/transmissions', {
        key: s.tenant.apiKey,
        body: {
          recipients: [{ email: 'x@dest.test' }],
          content: { subject: 's', text: 'x', headers: { 'X-A': value } },
        },
      });
      expect(bad.statusCode, value).toBe(422);
    }
  });
});

describe('SMTP submission', () => {
  it('bare CR, bare LF and <CR>.<CR> in an SMTP-submitted message leave as CRLF lines only, DKIM pass', async () => {
    const data = `From: Shop <shop@example.com>\r\nTo: smtp-bytes@dest.test\r\nSubject: bytes\r\n\r\n${SMUGGLING_BODY}last`;
    const reply = await submitRaw('smtp-bytes@dest.test', data);
    queuedId(reply);
    const m = await deliveredTo('smtp-bytes@dest.test');
    expectCleanWire(m);
    expect(await verifier.verify(m.message)).toBe('pass');
    const body = m.message.toString('latin1');
    expect(body).toContain('\r\none\r\n.\r\nMAIL FROM:<evil@dest.test>\r\n');
    // Dot-stuffed on the wire: the lone dots are content, not the end of data.
    expect(m.wire.toString('latin1')).toContain('\r\none\r\n..\r\nMAIL FROM:<evil@dest.test>\r\n');
  });

  it('an SMTP message is delivered with exactly one Date and one Message-ID (render threads on)', async () => {
    expect(s.ctx.c.config.renderThreads).toBeGreaterThanOrEqual(1);
    const own = [
      'From: Shop <shop@example.com>',
      'To: one-date@dest.test',
      'Subject: dated',
      'Date: Tue, 24 Nov 2026 10:00:00 +0000',
      'Message-ID: <own-id@example.com>',
      '',
      'hi',
      '',
    ].join('\r\n');
    queuedId(await submitRaw('one-date@dest.test', own));
    queuedId(await submitRaw('no-date@dest.test', 'From: shop@example.com\r\nSubject: undated\r\n\r\nhi\r\n'));
    for (const rcpt of ['one-date@dest.test', 'no-date@dest.test']) {
      const m = await deliveredTo(rcpt);
      const head = headerSection(m.message);
      expect(head.match(/^date:/gim), head).toHaveLength(1);
      expect(head.match(/^message-id:/gim), head).toHaveLength(1);
      expect(await verifier.verify(m.message)).toBe('pass');
    }
    expect(headerSection((await deliveredTo('one-date@dest.test')).message)).toContain(
      'Message-ID: <own-id@example.com>\r\n',
    );
  });

  it('Resent-Bcc is removed like Bcc', async () => {
    const data = [
      'From: Shop <shop@example.com>',
      'To: resent@dest.test',
      'Resent-From: shop@example.com',
      'Resent-Bcc: hidden@dest.test,',
      ' hidden2@dest.test',
      'bcc: hidden3@dest.test',
      'Subject: resent',
      '',
      'hi',
      '',
    ].join('\r\n');
    queuedId(await submitRaw('resent@dest.test', data));
    const m = await deliveredTo('resent@dest.test');
    const text = m.message.toString('latin1');
    expect(text).not.toMatch(/^resent-bcc:/im);
    expect(text).not.toMatch(/^bcc:/im);
    expect(text).not.toContain('hidden');
    expect(text).toMatch(/^Resent-From: shop@example\.com\r$/m);
  });

  it('NUL in the header or the body is refused with 554 5.6.0', async () => {
    const head = 'From: Shop <shop@example.com>\r\nSubject: a\u0000b\r\n\r\nhi\r\n';
    expect(await submitRaw('nul@dest.test', head)).toMatch(/^554 5\.6\.0 .*NUL/);
    const body = 'From: Shop <shop@example.com>\r\nSubject: ok\r\n\r\nh\u0000i\r\n';
    expect(await submitRaw('nul@dest.test', body)).toMatch(/^554 5\.6\.0 .*NUL/);
  });

  it('raw 8-bit header bytes are refused with 554 5.6.7; an 8-bit body is still accepted', async () => {
    const head = Buffer.from('From: Zoë <shop@example.com>\r\nSubject: Grüße\r\n\r\nhi\r\n', 'utf8');
    expect(await submitRaw('eightbit@dest.test', head)).toMatch(/^554 5\.6\.7 /);
    const latin1 = Buffer.from('From: shop@example.com\r\nSubject: Gr\xfc\xdfe\r\n\r\nhi\r\n', 'latin1');
    expect(await submitRaw('eightbit@dest.test', latin1)).toMatch(/^554 5\.6\.7 /);
    const body = Buffer.from(
      'From: =?UTF-8?Q?Zo=C3=AB?= <shop@example.com>\r\nSubject: ok\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGrüße\r\n',
      'utf8',
    );
    queuedId(await submitRaw('eightbit-body@dest.test', body));
    const m = await deliveredTo('eightbit-body@dest.test');
    expect(m.message.toString('utf8')).toContain('\r\n\r\nGrüße\r\n');
    expect(await verifier.verify(m.message)).toBe('pass');
  });
});
