import type { RecipientStatus } from './delivery-status.ts';
import { addressField, diagnosticText, parseFieldGroups, smtpFigures } from './delivery-status.ts';
import { looksLikeAutoReply, looksLikeBounce, plainBounce } from './heuristics.ts';
import { type WalkedMessage, walkMessage } from './mime-walk.ts';

/**
 * What an inbound message is: a DSN (RFC 3464, or a plain-text bounce read heuristically), an
 * ARF complaint (RFC 5965), an auto-reply, or something else. Pure: no database, no I/O; the
 * MIME is walked by mime-walk.ts, decoding only the parts read here; every step is linear in its
 * input (anyone may send mail to the listener).
 */

/** What ties a report to one of our messages, besides the address it was sent to. */
export interface References {
  /** VERP tokens (`bounces+<token>@`) seen in the returned message or headers (unverified). */
  tokens: string[];
  /** Our message ids from `Message-ID: <id@domain>` of the returned message (unverified). */
  messageIds: string[];
}

export type InboundReport =
  | { kind: 'dsn'; standard: boolean; recipients: RecipientStatus[]; refs: References }
  | { kind: 'complaint'; feedbackType: string; userAgent: string | null; recipient: string | null; refs: References }
  | { kind: 'auto_reply'; refs: References }
  | { kind: 'other'; refs: References };

/** Text scanned by the heuristics and reference searches: enough for any real bounce. */
const SCAN_CHARS = 256 * 1024;
const MAX_REFS = 10;

const TOKEN_RE = /bounces\+([a-z0-9]{17,100})@/gi;
const MESSAGE_ID_RE = /^message-id:\s*<([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})@[^>\s]+>/gim;

export function findReferences(text: string): References {
  const scan = text.slice(0, SCAN_CHARS);
  const tokens = new Set<string>();
  const messageIds = new Set<string>();
  for (const m of scan.matchAll(TOKEN_RE)) {
    if (tokens.size >= MAX_REFS) break;
    if (m[1]) tokens.add(m[1].toLowerCase());
  }
  for (const m of scan.matchAll(MESSAGE_ID_RE)) {
    if (messageIds.size >= MAX_REFS) break;
    if (m[1]) messageIds.add(m[1].toLowerCase());
  }
  return { tokens: [...tokens], messageIds: [...messageIds] };
}

const partOf = (mail: WalkedMessage, types: string[]) => mail.parts.find((p) => types.includes(p.type))?.text;

/** The returned message (or its headers) inside a report, as text. */
function returnedPart(mail: WalkedMessage): string {
  return mail.parts
    .filter((p) => RETURNED.includes(p.type))
    .map((p) => p.text.slice(0, SCAN_CHARS))
    .join('\r\n');
}

const RETURNED = [
  'message/rfc822',
  'message/global',
  'text/rfc822-headers',
  'message/rfc822-headers',
  'message/global-headers',
];

function recipientsOf(statusText: string): RecipientStatus[] {
  const groups = parseFieldGroups(statusText.slice(0, SCAN_CHARS));
  const out: RecipientStatus[] = [];
  // Group 0 is about the message; recipient groups carry Action (RFC 3464 2.3).
  for (const g of groups) {
    const actionRaw = g.get('action')?.toLowerCase().trim();
    if (!actionRaw) continue;
    const action = actionRaw.startsWith('failed') ? 'failed' : actionRaw.startsWith('delayed') ? 'delayed' : 'other';
    const diagnostic = diagnosticText(g.get('diagnostic-code')) ?? '';
    const figures = smtpFigures(diagnostic);
    const status = /^[245]\.\d{1,3}\.\d{1,3}/.exec(g.get('status') ?? '')?.[0] ?? null;
    out.push({
      recipient: addressField(g.get('final-recipient')) ?? addressField(g.get('original-recipient')),
      action,
      smtpCode: figures.code,
      // A generic status (X.0.0, as Exim gives) yields to a specific code in the diagnostic.
      enhancedCode: status && !/\.0\.0$/.test(status) ? status : (figures.enhanced ?? status),
      diagnostic: (diagnostic || (status ? `Status: ${status}` : '')).slice(0, 1000),
      remoteMta: addressField(g.get('remote-mta')),
    });
  }
  return out;
}

export async function parseInbound(raw: Buffer): Promise<InboundReport> {
  const mail = await walkMessage(raw);
  const type = mail.contentType === 'multipart/report' ? (mail.reportType ?? '') : null;
  // A report is a report whatever else its headers say (MTAs mark DSNs Auto-Submitted).
  if (type === 'delivery-status') {
    const status = partOf(mail, ['message/delivery-status', 'message/global-delivery-status']);
    const refs = findReferences(returnedPart(mail));
    if (status !== undefined) {
      const recipients = recipientsOf(status);
      if (recipients.length > 0) return { kind: 'dsn', standard: true, recipients, refs };
    }
    // A report without a readable status part: read its text like a plain bounce.
    const text = `${mail.text}\n${status ?? ''}`;
    return { kind: 'dsn', standard: false, recipients: [plainBounce(text)], refs };
  }
  if (type === 'feedback-report') {
    const feedback = (partOf(mail, ['message/feedback-report']) ?? '').slice(0, SCAN_CHARS);
    const fields = parseFieldGroups(feedback)[0];
    return {
      kind: 'complaint',
      feedbackType: (fields?.get('feedback-type') ?? 'other').toLowerCase().slice(0, 64),
      userAgent: fields?.get('user-agent')?.slice(0, 200) ?? null,
      recipient: addressField(fields?.get('original-rcpt-to')),
      // The returned message may be an attachment or (Content-Disposition: inline) the text;
      // Original-Mail-From in the report itself carries our token too.
      refs: findReferences(`${returnedPart(mail)}\r\n${feedback}\r\n${mail.text.slice(0, SCAN_CHARS)}`),
    };
  }
  const text = mail.text.slice(0, SCAN_CHARS);
  const refs = findReferences(`${text}\r\n${returnedPart(mail)}`);
  const head = { from: mail.headers.get('from') ?? '', subject: mail.subject };
  if (looksLikeBounce(head, text)) return { kind: 'dsn', standard: false, recipients: [plainBounce(text)], refs };
  if (looksLikeAutoReply(mail.headers, head.subject, text)) return { kind: 'auto_reply', refs };
  return { kind: 'other', refs };
}
