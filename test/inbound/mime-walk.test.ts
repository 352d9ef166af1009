import { describe, expect, it } from 'vitest';
import { walkMessage } from '../../src/modules/feedback/mime-walk.ts';
import { parseInbound } from '../../src/modules/feedback/report-parser.ts';

/**
 * The MIME walk of inbound reports (no database): transfer encodings and charsets of the parts
 * it reads, what it skips, and a report whose parts are all encoded still read as one.
 */
const crlf = (s: string) => s.replace(/\r?\n/g, '\r\n');
const b64 = (s: string) => Buffer.from(s).toString('base64').replace(/.{76}/g, '$&\r\n');

const encodedDsn = crlf(`From: MAILER-DAEMON@mx.dest.test
To: bounces+x@bounce.test
Subject: =?ISO-8859-1?Q?Unzustellbar:_Gr=FC=DFe?=
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="b1"

preamble, ignored
--b1
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Die Nachricht an <ann@dest.test> konnte nicht zugestellt werden: Postfach =
unbekannt. Gr=FC=DFe
--b1
Content-Type: application/pdf; name="big.pdf"
Content-Disposition: attachment; filename="big.pdf"
Content-Transfer-Encoding: base64

${b64('%PDF-1.4 not read at all')}
--b1
Content-Type: message/delivery-status
Content-Transfer-Encoding: base64

${b64('Reporting-MTA: dns; mx.dest.test\r\n\r\nFinal-Recipient: rfc822; ann@dest.test\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 unknown user\r\n')}
--b1
Content-Type: message/rfc822

Return-Path: <bounces+abc@bounce.test>
Message-ID: <6f1c2a3e-1111-4222-8333-944455556666@shop.test>
Subject: Hello

Body of the returned message
--b1--
epilogue, ignored
`);

describe('walkMessage', () => {
  it('decodes quoted-printable Latin-1 text, a base64 status part and MIME-word subjects; skips attachments', async () => {
    const mail = await walkMessage(Buffer.from(encodedDsn, 'latin1'));
    expect(mail.contentType).toBe('multipart/report');
    expect(mail.reportType).toBe('delivery-status');
    expect(mail.subject).toBe('Unzustellbar: Grüße');
    expect(mail.text).toContain('Postfach unbekannt. Grüße');
    expect(mail.text).not.toMatch(/preamble|epilogue/);
    expect(mail.parts.map((p) => p.type)).toEqual(['message/delivery-status', 'message/rfc822']);
    expect(mail.parts[0]?.text).toContain('Action: failed');
    expect(mail.parts[1]?.text).toContain('Message-ID: <6f1c2a3e-1111-4222-8333-944455556666@shop.test>');
    expect(JSON.stringify(mail)).not.toContain('PDF');
  });

  it('an encoded report is still a standard DSN with its references', async () => {
    const report = await parseInbound(Buffer.from(encodedDsn, 'latin1'));
    expect(report).toMatchObject({
      kind: 'dsn',
      standard: true,
      recipients: [{ recipient: 'ann@dest.test', action: 'failed', enhancedCode: '5.1.1', smtpCode: 550 }],
      refs: { messageIds: ['6f1c2a3e-1111-4222-8333-944455556666'] },
    });
  });

  it('a message without Content-Type is text/plain; an unknown charset is read as Latin-1', async () => {
    const plain = await walkMessage(Buffer.from('Subject: hi\r\n\r\nhello there\r\n'));
    expect(plain.text).toContain('hello there');
    const odd = await walkMessage(
      Buffer.from('Content-Type: text/plain; charset=x-no-such-charset\r\n\r\ncaf\xe9 550 5.1.1\r\n', 'latin1'),
    );
    expect(odd.text).toContain('café 550 5.1.1');
  });

  it('more than 200 MIME parts is refused by the walk (the listener counts such mail unmatched)', async () => {
    const parts = Array.from({ length: 250 }, (_, i) => `--p\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join(
      '',
    );
    const raw = Buffer.from(`Content-Type: multipart/mixed; boundary="p"\r\n\r\n${parts}--p--\r\n`);
    await expect(walkMessage(raw)).rejects.toThrow(/more than 200 MIME parts/);
  });

  it('an HTML-only message nested 20,000 elements deep is read whole (one pass, no tree), without a stack overflow', async () => {
    const html = `<p>Mailbox unavailable: ann@dest.test</p>${'<div>'.repeat(20_000)}550 5.1.1 deep down`;
    const raw = Buffer.from(`From: x@anywhere.test\r\nContent-Type: text/html\r\n\r\n${html}\r\n`);
    const mail = await walkMessage(raw);
    expect(mail.text).toContain('Mailbox unavailable: ann@dest.test');
    expect(mail.text).toContain('550 5.1.1 deep down');
  });
});
