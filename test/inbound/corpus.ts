/**
 * Bounce, complaint and auto-reply samples written for these tests in the styles of common MTAs
 * and providers (not copied from real mail). Each takes what ties it to one of our messages: the
 * VERP envelope sender it was returned to, the recipient, and our Message-ID.
 */
export interface Original {
  /** `bounces+<token>@<domain>` as the MX saw it. */
  envelopeFrom: string;
  recipient: string;
  /** Our message id (the Message-ID is `<id>@<from domain>`). */
  messageId: string;
  fromDomain?: string;
}

const crlf = (s: string) => s.replace(/\r?\n/g, '\r\n');

function returnedHeaders(o: Original): string {
  return `Return-Path: <${o.envelopeFrom}>
Received: from postyard.test (postyard.test [127.0.0.1]) by mx1.dest.test with ESMTPS id 4Xy2
Message-ID: <${o.messageId}@${o.fromDomain ?? 'shop.test'}>
Date: Thu, 26 Nov 2026 03:00:00 +0000
From: Shop <news@${o.fromDomain ?? 'shop.test'}>
To: ${o.recipient}
Subject: Hello
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8`;
}

export function postfixDsn(o: Original, status = '5.1.1', action = 'failed'): string {
  const diag =
    action === 'delayed'
      ? `smtp; 451 4.4.1 <${o.recipient}>: connection timed out`
      : `smtp; 550 ${status} <${o.recipient}>: Recipient address rejected: User unknown in local recipient table`;
  return crlf(`Return-Path: <>
Received: by mx1.dest.test (Postfix) id 4XyZ1; Thu, 26 Nov 2026 03:01:00 +0000 (UTC)
Date: Thu, 26 Nov 2026 03:01:00 +0000 (UTC)
From: MAILER-DAEMON@mx1.dest.test (Mail Delivery System)
Subject: ${action === 'delayed' ? 'Delayed Mail (still being retried)' : 'Undelivered Mail Returned to Sender'}
To: ${o.envelopeFrom}
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="4XyZ1.1764126060/mx1.dest.test"
Message-Id: <20261126030100.4XyZ1@mx1.dest.test>

This is a MIME-encapsulated message.

--4XyZ1.1764126060/mx1.dest.test
Content-Description: Notification
Content-Type: text/plain; charset=us-ascii

This is the mail system at host mx1.dest.test.

I'm sorry to have to inform you that your message could not
be delivered to one or more recipients. It's attached below.

                   The mail system

<${o.recipient}>: host mx2.dest.test[127.0.0.1] said: 550 ${status} <${o.recipient}>:
    Recipient address rejected (in reply to RCPT TO command)

--4XyZ1.1764126060/mx1.dest.test
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; mx1.dest.test
X-Postfix-Queue-ID: 4XyZ1
X-Postfix-Sender: rfc822; ${o.envelopeFrom}
Arrival-Date: Thu, 26 Nov 2026 03:00:59 +0000 (UTC)

Final-Recipient: rfc822; ${o.recipient}
Original-Recipient: rfc822;${o.recipient}
Action: ${action}
Status: ${action === 'delayed' ? '4.4.1' : status}
Remote-MTA: dns; mx2.dest.test
Diagnostic-Code: ${diag}
${action === 'delayed' ? 'Will-Retry-Until: Sun, 29 Nov 2026 03:00:59 +0000 (UTC)\n' : ''}
--4XyZ1.1764126060/mx1.dest.test
Content-Description: Undelivered Message Headers
Content-Type: text/rfc822-headers

${returnedHeaders(o)}

--4XyZ1.1764126060/mx1.dest.test--
`);
}

/** Exim with DSN: the status says 5.0.0, the diagnostic carries the real reply (mailbox full). */
export function eximDsn(o: Original): string {
  return crlf(`From: Mail Delivery System <Mailer-Daemon@dest.test>
To: ${o.envelopeFrom}
Subject: Mail delivery failed: returning message to sender
Auto-Submitted: auto-replied
Message-Id: <E1tAbCd-0001@dest.test>
Content-Type: multipart/report; report-type=delivery-status; boundary=1764126060-eximdsn-1

--1764126060-eximdsn-1
Content-type: text/plain; charset=us-ascii

This message was created automatically by mail delivery software.

A message that you sent could not be delivered to one or more of its
recipients. This is a permanent error. The following address(es) failed:

  ${o.recipient}
    host mx1.dest.test [127.0.0.1]
    SMTP error from remote mail server after RCPT TO:<${o.recipient}>:
    552 5.2.2 Mailbox full: quota exceeded

--1764126060-eximdsn-1
Content-type: message/delivery-status

Reporting-MTA: dns; dest.test

Action: failed
Final-Recipient: rfc822;${o.recipient}
Status: 5.0.0
Remote-MTA: dns; mx1.dest.test
Diagnostic-Code: smtp; 552 5.2.2 Mailbox full: quota exceeded

--1764126060-eximdsn-1
Content-type: message/rfc822

${returnedHeaders(o)}

Hello there
--1764126060-eximdsn-1--
`);
}

/** Exim without DSN support: plain text, the copy of the message after the usual line. */
export function eximPlain(o: Original): string {
  return crlf(`From: Mail Delivery System <Mailer-Daemon@relay.dest.test>
To: ${o.envelopeFrom}
Subject: Mail delivery failed: returning message to sender
Message-Id: <E1tAbCe-0002@relay.dest.test>

This message was created automatically by mail delivery software.

A message that you sent could not be delivered to one or more of its
recipients. This is a permanent error. The following address(es) failed:

  ${o.recipient}
    SMTP error from remote mail server after RCPT TO:<${o.recipient}>:
    host mx1.dest.test [127.0.0.1]: 550 5.1.1 <${o.recipient}>... User unknown

------ This is a copy of the message, including all the headers. ------

${returnedHeaders(o)}

Hello there
`);
}

/** Exchange / Microsoft 365 style NDR: HTML notice, 5.1.10 in the status part. */
export function exchangeDsn(o: Original): string {
  return crlf(`From: Microsoft Outlook <MicrosoftExchange329e71ec88ae4615bbc36ab6ce41109e@dest.test>
To: <${o.envelopeFrom}>
Subject: Undeliverable: Hello
Auto-Submitted: auto-replied
X-MS-Exchange-Message-Is-Ndr:
Content-Language: en-US
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="_000_ndr_exch_"

--_000_ndr_exch_
Content-Type: multipart/alternative; boundary="_001_alt_"

--_001_alt_
Content-Type: text/plain; charset="us-ascii"

Your message to ${o.recipient} couldn't be delivered.
${o.recipient.split('@')[0]} wasn't found at dest.test.

--_001_alt_
Content-Type: text/html; charset="us-ascii"

<html><body><p>Your message to <b>${o.recipient}</b> couldn't be delivered.</p>
<p>Remote Server returned '550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'</p></body></html>

--_001_alt_--

--_000_ndr_exch_
Content-Type: message/delivery-status

Reporting-MTA: dns;DB9PR01MB1234.eurprd01.prod.exchangelabs.test
Received-From-MTA: dns;postyard.test
Arrival-Date: Thu, 26 Nov 2026 03:00:00 +0000

Original-Recipient: rfc822;${o.recipient}
Final-Recipient: rfc822;${o.recipient}
Action: failed
Status: 5.1.10
Diagnostic-Code: smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup

--_000_ndr_exch_
Content-Type: message/rfc822

${returnedHeaders(o)}

Hello there

--_000_ndr_exch_--
`);
}

/** Gmail's older plain-text notice (no multipart/report). */
export function gmailPlain(o: Original): string {
  return crlf(`From: Mail Delivery Subsystem <mailer-daemon@googlemail.test>
To: ${o.envelopeFrom}
Subject: Delivery Status Notification (Failure)
Message-ID: <000000000000abcd@google.test>
Content-Type: text/plain; charset="UTF-8"

Delivery to the following recipient failed permanently:

     ${o.recipient}

Technical details of permanent failure:
Google tried to deliver your message, but it was rejected by the server for the recipient domain dest.test by mx1.dest.test. [127.0.0.1].

The error that the other server returned was:
550-5.1.1 The email account that you tried to reach does not exist. Please try
550 5.1.1 double-checking the recipient's email address for typos.

----- Original message -----

${returnedHeaders(o)}

Hello there
`);
}

/** qmail's "failure notice": a reason without SMTP reply code, the enhanced code in (#5.1.1). */
export function qmailPlain(o: Original): string {
  return crlf(`From: MAILER-DAEMON@mail.dest.test
To: ${o.envelopeFrom}
Subject: failure notice

Hi. This is the qmail-send program at mail.dest.test.
I'm afraid I wasn't able to deliver your message to the following addresses.
This is a permanent error; I've given up. Sorry it didn't work out.

<${o.recipient}>:
Sorry, no mailbox here by that name. (#5.1.1)

--- Below this line is a copy of the message.

${returnedHeaders(o)}

Hello there
`);
}

/** A plain notice that names no code at all, only the classic wording. */
export function wordingOnly(o: Original): string {
  return crlf(`From: postmaster@old.dest.test
To: ${o.envelopeFrom}
Subject: Returned mail: see transcript for details

The original message was received from postyard.test

   ----- The following addresses had permanent fatal errors -----
${o.recipient}
    (reason: user unknown)
`);
}

/** Yahoo-style ARF (RFC 5965) with the whole original message (its Return-Path has our token). */
export function yahooArf(o: Original, to: string): string {
  return crlf(`From: feedbackloop@yahoo.test
To: ${to}
Subject: FW: Hello
Date: Thu, 26 Nov 2026 04:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="----=_arf_yahoo"

------=_arf_yahoo
Content-Type: text/plain; charset="US-ASCII"
Content-Transfer-Encoding: 7bit

This is an email abuse report for an email message received from IP 127.0.0.1 on Thu, 26 Nov 2026 03:00:00 +0000

------=_arf_yahoo
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: Yahoo!-Mail-Feedback/2.0
Version: 0.1
Original-Mail-From: <${o.envelopeFrom}>
Original-Rcpt-To: <${o.recipient}>
Received-Date: Thu, 26 Nov 2026 03:00:00 +0000
Reported-Domain: shop.test
Authentication-Results: mta1.yahoo.test  from=shop.test; domainkeys=neutral (no sig);  dkim=pass (ok)

------=_arf_yahoo
Content-Type: message/rfc822
Content-Disposition: inline

${returnedHeaders(o)}

Hello there

------=_arf_yahoo--
`);
}

/**
 * Microsoft JMRP-style report: recipient redacted, Return-Path rewritten, only our Message-ID
 * left to match on.
 */
export function microsoftArf(o: Original, to: string): string {
  const headers = returnedHeaders(o)
    .replace(/^Return-Path: .*$/m, 'X-HmXmrOriginalRecipient: <redacted@outlook.test>')
    .replace(/^To: .*$/m, 'To: redacted@outlook.test');
  return crlf(`From: staff@hotmail.test
To: ${to}
Subject: complaint about message from 127.0.0.1
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="jmrp_boundary_1"

--jmrp_boundary_1
Content-Type: text/plain

This is an email abuse report for an email message received from IP 127.0.0.1.

--jmrp_boundary_1
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: Microsoft JMRP/1.0
Version: 1
Source-IP: 127.0.0.1
Arrival-Date: Thu, 26 Nov 2026 03:00:00 +0000

--jmrp_boundary_1
Content-Type: message/rfc822

${headers}

Hello there
--jmrp_boundary_1--
`);
}

export const AUTO_REPLIES: Record<string, (o: Original) => string> = {
  'RFC 3834 Auto-Submitted out-of-office': (o) =>
    crlf(`From: Bob <${o.recipient}>
To: ${o.envelopeFrom}
Subject: Out of Office: Hello
Auto-Submitted: auto-replied

I am out of the office until Monday with limited access to email.
`),
  'X-Autoreply vacation': (o) =>
    crlf(`From: ${o.recipient}
To: ${o.envelopeFrom}
Subject: Re: Hello
X-Autoreply: yes

I'm on vacation.
`),
  'Precedence: auto_reply': (o) =>
    crlf(`From: ${o.recipient}
To: ${o.envelopeFrom}
Subject: Re: Hello
Precedence: auto_reply

Thanks for your message, we will answer within 2 days.
`),
  'subject only (Automatic reply)': (o) =>
    crlf(`From: ${o.recipient}
To: ${o.envelopeFrom}
Subject: Automatic reply: Hello

I am away.
`),
  'challenge-response': (o) =>
    crlf(`From: ${o.recipient}
To: ${o.envelopeFrom}
Subject: Re: Hello

To stop spam, please confirm your message by clicking the link below; you only have to do this once.
`),
};
