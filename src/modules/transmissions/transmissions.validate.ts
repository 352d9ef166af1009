import type { Static } from '@sinclair/typebox';
import {
  checkMailbox,
  domainOf,
  formatMailbox,
  hasControlChars,
  isValidEmail,
  normalizeEmail,
} from '../../lib/email.ts';
import { validationError } from '../../lib/errors.ts';
import { Pacer } from '../../lib/pacer.ts';
import { headerNameProblem } from '../content/content-rules.ts';
import { effectiveContent, sendProblems, storedTemplateFields, type TemplateForSend } from '../content/send-content.ts';
import type { GroupHeaders, RecipientRole, StoredContent } from '../content/stored-content.ts';
import {
  MAX_GROUP_RECIPIENTS,
  MAX_METADATA_BYTES,
  MAX_METADATA_KEYS,
  type TransmissionBody,
} from './transmissions.schema.ts';

export type TransmissionRequest = Static<typeof TransmissionBody>;

export interface AcceptRecipient {
  email: string;
  name: string | null;
  substitutionData: Record<string, unknown> | null;
  metadata: Record<string, string>;
  /** Set for every recipient of a group message (content.group), null for everyone else's. */
  role: RecipientRole | null;
}

/** A transmission ready to accept, from the HTTP API or from SMTP submission. */
export interface AcceptInput {
  source: 'api' | 'smtp';
  recipients: AcceptRecipient[];
  content: StoredContent;
  /** SMTP submissions keep their MIME as sent. */
  rawMessage: Buffer | null;
  mailType: 'transactional' | 'marketing';
  tags: string[];
  metadata: Record<string, string>;
  /** Tracking not given here takes the tenant's default for the mail type at accept (tracking/settings.ts). */
  options: { sandbox: boolean; open_tracking?: boolean | undefined; click_tracking?: boolean | undefined };
  startTime: string | null;
  /** `options.ip_pool` (id or name), resolved to the pool's id at accept (docs/ip-pools.md). */
  ipPool?: string | null;
  /**
   * Domains the message claims to be from (sender-domain policy): the From address; over SMTP
   * every From mailbox and the Sender.
   */
  senderDomains: string[];
}

const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}\s*$/;
/** A Content-ID's value: printable ASCII without spaces or the angle brackets that enclose it. */
const CONTENT_ID = /^[!-;=?-~]+$/;

type Problem = { field: string; message: string };

function checkMetadata(meta: Record<string, string>, field: string, problems: Problem[]) {
  if (Object.keys(meta).length > MAX_METADATA_KEYS) {
    problems.push({ field, message: `${field} may hold at most ${MAX_METADATA_KEYS} keys` });
  } else if (Buffer.byteLength(JSON.stringify(meta)) > MAX_METADATA_BYTES) {
    problems.push({ field, message: `${field} may be at most 10 KB serialized` });
  }
}

/**
 * Semantic validation of a structurally valid body. Collects every problem (one 422 entry per
 * field) and returns the normalized transmission plus the recipient list in request order.
 */
export async function validateTransmission(
  body: TransmissionRequest,
  defaultFrom: string | null,
  pace: Pacer = new Pacer(),
  /** What content.template_id resolved to (null: unknown or unpublished); see send-content.ts. */
  template?: TemplateForSend | null,
): Promise<AcceptInput> {
  const problems: Problem[] = [];
  // With template_id: the template version's content, the request's from/reply_to/headers over it.
  const c = effectiveContent(body.content, template);
  const o = body.options ?? {};

  // From and Reply-To are parsed once, here, by the parser the MIME builder uses; what is stored
  // (and so sent) is rebuilt from the parsed mailbox, never the string as given.
  const fromRaw = c.from ?? defaultFrom;
  const from = fromRaw ? checkMailbox(fromRaw) : null;
  if (!from)
    problems.push({ field: 'content.from', message: 'content.from is required (the tenant has no default sender)' });
  else if ('error' in from)
    problems.push({
      field: 'content.from',
      message: `${c.from === undefined ? "the tenant's default sender" : 'content.from'} ${from.error}`,
    });
  const replyTo = c.reply_to === undefined ? null : checkMailbox(c.reply_to);
  if (replyTo && 'error' in replyTo)
    problems.push({ field: 'content.reply_to', message: `content.reply_to ${replyTo.error}` });
  if (hasControlChars(c.subject))
    problems.push({ field: 'content.subject', message: 'content.subject must not contain control characters (CR/LF)' });
  if (c.text === undefined && c.html === undefined && c.template_id === undefined) {
    problems.push({ field: 'content', message: 'content needs one of text, html or template_id' });
  }
  // The template language: syntax of inline content, or what content.template_id resolved to.
  problems.push(...(await sendProblems(body.content, template)));
  for (const [name, value] of Object.entries(c.headers ?? {})) {
    const field = `content.headers.${name}`;
    const nameProblem = headerNameProblem(name);
    if (nameProblem) problems.push({ field, message: nameProblem });
    if (hasControlChars(value))
      problems.push({ field, message: 'header value must not contain CR, LF or other control characters' });
  }
  (c.attachments ?? []).forEach((a, i) => {
    const field = `content.attachments[${i}]`;
    if (hasControlChars(a.filename) || /["\\/]/.test(a.filename))
      problems.push({
        field: `${field}.filename`,
        message: 'filename must not contain control characters, quotes or slashes',
      });
    if (!/^[\w.+-]+\/[\w.+-]+$/.test(a.content_type))
      problems.push({ field: `${field}.content_type`, message: 'content_type must look like type/subtype' });
    if (!BASE64.test(a.data)) problems.push({ field: `${field}.data`, message: 'data must be base64' });
    if (a.content_id !== undefined && !CONTENT_ID.test(a.content_id))
      problems.push({
        field: `${field}.content_id`,
        message: 'content_id must be printable ASCII without spaces, < or >',
      });
  });
  const txMeta = o.metadata ?? {};
  checkMetadata(txMeta, 'options.metadata', problems);
  const tags = [...new Set(o.tags ?? [])];
  tags.forEach((t, i) => {
    if (hasControlChars(t))
      problems.push({ field: `options.tags[${i}]`, message: 'tags must not contain control characters' });
  });
  let startTime: string | null = null;
  if (o.start_time !== undefined) {
    const ms = Date.parse(o.start_time);
    if (Number.isNaN(ms))
      problems.push({ field: 'options.start_time', message: 'options.start_time must be an ISO-8601 time' });
    else if (ms > Date.now() + 31 * 24 * 3600_000)
      problems.push({ field: 'options.start_time', message: 'options.start_time may be at most 31 days ahead' });
    else startTime = new Date(ms).toISOString();
  }

  const grouped = body.recipients.some((r) => r.role === 'cc' || r.role === 'bcc');
  if (grouped) problems.push(...groupProblems(body.recipients));
  const recipients: AcceptRecipient[] = [];
  // Up to 10,000 recipients: paced, so the event loop gets turns in between.
  for (const [i, r] of body.recipients.entries()) {
    const email = r.email.trim();
    if (!isValidEmail(email)) problems.push({ field: `recipients[${i}].email`, message: 'not a valid email address' });
    if (r.name !== undefined && hasControlChars(r.name))
      problems.push({ field: `recipients[${i}].name`, message: 'name must not contain control characters (CR/LF)' });
    const metadata = { ...txMeta, ...(r.metadata ?? {}) };
    if (r.metadata) checkMetadata(metadata, `recipients[${i}].metadata`, problems);
    recipients.push({
      email: normalizeEmail(email),
      name: r.name?.trim() || null,
      substitutionData: r.substitution_data ?? null,
      metadata,
      role: grouped ? (r.role ?? 'to') : null,
    });
    await pace.tick();
  }

  if (problems.length) throw validationError(problems);
  return {
    source: 'api',
    recipients,
    content: {
      subject: c.subject,
      from: from && 'mailbox' in from ? formatMailbox(from.mailbox) : '',
      reply_to: replyTo && 'mailbox' in replyTo ? formatMailbox(replyTo.mailbox) : null,
      text: c.text ?? null,
      html: c.html ?? null,
      headers: c.headers ?? {},
      attachments: (c.attachments ?? []).map((a) => ({
        filename: a.filename,
        content_type: a.content_type,
        data: a.data.replace(/\s/g, ''),
        ...(a.content_id !== undefined ? { content_id: a.content_id } : {}),
      })),
      template_id: c.template_id ?? null,
      ...storedTemplateFields(template, body.substitution_data),
      ...(grouped ? { group: groupHeaders(recipients) } : {}),
    },
    rawMessage: null,
    mailType: o.mail_type ?? 'transactional',
    tags,
    metadata: txMeta,
    options: {
      sandbox: o.sandbox ?? false,
      open_tracking: o.open_tracking,
      click_tracking: o.click_tracking,
    },
    startTime,
    ipPool: o.ip_pool ?? null,
    senderDomains: from && 'mailbox' in from ? [domainOf(from.mailbox.email)] : [],
  };
}

/** What a group message (any `cc` or `bcc` recipient) must satisfy beyond every transmission's rules. */
function groupProblems(recipients: TransmissionRequest['recipients']): Problem[] {
  const problems: Problem[] = [];
  if (recipients.length > MAX_GROUP_RECIPIENTS)
    problems.push({
      field: 'recipients',
      message: `a transmission with cc or bcc recipients may have at most ${MAX_GROUP_RECIPIENTS} recipients`,
    });
  return problems;
}

/**
 * The To and Cc every copy of a group message shows, from the validated recipients: an address
 * given twice is listed once, where it first appears (the accept path queues that first one and
 * reports the other as a duplicate, so its role is the first one's too).
 */
export function groupHeaders(recipients: readonly AcceptRecipient[]): GroupHeaders {
  const group: GroupHeaders = { to: [], cc: [] };
  const seen = new Set<string>();
  for (const r of recipients) {
    const key = r.email.toLowerCase();
    if (seen.has(key)) continue;
    seen.add(key);
    if (r.role === 'to' || r.role === 'cc') group[r.role].push({ email: r.email, name: r.name });
  }
  return group;
}
