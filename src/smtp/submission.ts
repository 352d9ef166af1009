import { createHash } from 'node:crypto';
import libmime from 'libmime';
import addressparser from 'nodemailer/lib/addressparser/index.js';
import type { Container } from '../container.ts';
import { isValidEmail, normalizeEmail } from '../lib/email.ts';
import { newId } from '../lib/ids.ts';
import type { AcceptResult } from '../modules/transmissions/transmissions.service.ts';
import type { AcceptInput } from '../modules/transmissions/transmissions.validate.ts';
import {
  countHeader,
  findHeader,
  type HeaderField,
  MalformedMessageError,
  type MessageHeaders,
  parseHeaders,
  rewriteMessage,
} from './headers.ts';
import { OPTIONS_HEADER, parseOptions } from './options.ts';
import { reply } from './replies.ts';

/** Who is submitting: set on the SMTP session by a successful AUTH. */
export interface SmtpUser {
  tenantId: string;
  credentialId: string;
  username: string;
}

export interface Envelope {
  mailFrom: string;
  rcptTo: string[];
}

export interface PreparedSubmission {
  input: AcceptInput;
  idempotencyKey: string | undefined;
  /** What "the same request" means for the idempotency key (see fingerprint()). */
  fingerprint: unknown;
}

/** Idempotency scope of SMTP submissions: keys never collide with the HTTP API's. */
export const IDEMPOTENCY_SCOPE = 'SMTP submission';

/** Never delivered: Bcc would reveal the blind recipients, the options header is for Postyard only. */
const STRIPPED = new Set(['bcc', OPTIONS_HEADER]);
/** Set per attempt by most clients, so a retry of the same message differs only in these. */
const VOLATILE = new Set(['date', 'message-id']);

function rfc5322Date(d: Date): string {
  return d.toUTCString().replace(/GMT$/, '+0000');
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping them is the point
const CONTROL = /[\u0000-\u001f\u007f]+/g;

function formatMailbox(name: string, email: string): string {
  const clean = name.replace(CONTROL, ' ').trim();
  return clean ? `"${clean.replace(/["\\]/g, '\\$&')}" <${email}>` : email;
}

/** RFC 2047 encoded words (which nodemailer uses for any long or non-ASCII header) decoded. */
export function decodeHeader(value: string): string {
  return value.includes('=?') ? libmime.decodeWords(value) : value;
}

/** The first mailbox of an address field (groups flattened), name decoded. */
function firstMailbox(field: HeaderField | undefined): { name: string; address: string } | null {
  if (!field) return null;
  const found = addressparser(field.value, { flatten: true }).find((a) => a.address);
  return found ? { name: decodeHeader(found.name ?? ''), address: found.address } : null;
}

/**
 * Digest of the message as the idempotency fingerprint: the stripped message minus Date and
 * Message-ID (a client that rebuilds the same mail for a retry changes only those), the
 * envelope and the options.
 */
function fingerprint(raw: Buffer, h: MessageHeaders, envelope: Envelope, options: unknown): unknown {
  const stable = rewriteMessage(raw, h, (f) => STRIPPED.has(f.name) || VOLATILE.has(f.name));
  return {
    message_sha256: createHash('sha256').update(stable).digest('hex'),
    mail_from: envelope.mailFrom,
    rcpt_to: envelope.rcptTo,
    options,
  };
}

/** Turns a received message into the input of TransmissionsService.accept; throws SmtpReply. */
export function prepareSubmission(raw: Buffer, envelope: Envelope): PreparedSubmission {
  let h: MessageHeaders;
  try {
    h = parseHeaders(raw);
  } catch (err) {
    if (err instanceof MalformedMessageError) throw reply.malformed(`Malformed message: ${err.message}`);
    throw err;
  }
  if (countHeader(h, OPTIONS_HEADER) > 1) throw reply.malformed('X-Postyard-Options may appear only once');
  const optionsField = findHeader(h, OPTIONS_HEADER);
  const options = parseOptions(optionsField && decodeHeader(optionsField.value));
  const fromCount = countHeader(h, 'from');
  if (fromCount === 0) throw reply.malformed('The message has no From header');
  if (fromCount > 1) throw reply.malformed('The message has more than one From header');

  const from = firstMailbox(findHeader(h, 'from'));
  const fromEmail = from ? normalizeEmail(from.address) : '';
  if (!isValidEmail(fromEmail))
    throw reply.badSender('The From header needs a valid address like "Name <user@example.com>"');
  const fromDomain = fromEmail.slice(fromEmail.lastIndexOf('@') + 1);
  const replyToBox = firstMailbox(findHeader(h, 'reply-to'));
  const replyTo = replyToBox && isValidEmail(replyToBox.address) ? normalizeEmail(replyToBox.address) : null;

  // RFC 6409 section 8: a submission server may add a missing Date and Message-ID.
  const added: string[] = [];
  if (!findHeader(h, 'date')) added.push(`Date: ${rfc5322Date(new Date())}`);
  if (!findHeader(h, 'message-id')) added.push(`Message-ID: <${newId()}@${fromDomain}>`);
  const stripped = rewriteMessage(raw, h, (f: HeaderField) => STRIPPED.has(f.name), added);

  const recipients = envelope.rcptTo.map((email) => ({
    email: normalizeEmail(email),
    name: null,
    substitutionData: null,
    metadata: options.metadata,
  }));
  const subjectField = findHeader(h, 'subject');
  // Shown by the API; a decoded encoded-word could hide a line break.
  const subject = subjectField ? decodeHeader(subjectField.value).replace(CONTROL, ' ') : null;
  const input: AcceptInput = {
    source: 'smtp',
    recipients,
    content: {
      subject,
      from: formatMailbox(from?.name ?? '', fromEmail),
      reply_to: replyTo,
      text: null,
      html: null,
      headers: {},
      attachments: [],
      template_id: null,
    },
    rawMessage: stripped,
    mailType: options.mailType,
    tags: options.tags,
    metadata: options.metadata,
    // The MIME is delivered as sent: no link or pixel rewriting for SMTP submissions.
    options: { sandbox: false, open_tracking: false, click_tracking: false },
    startTime: null,
    fromDomain,
  };
  return {
    input,
    idempotencyKey: options.idempotencyKey,
    fingerprint: options.idempotencyKey ? fingerprint(raw, h, envelope, options) : null,
  };
}

export interface Submitted {
  transmissionId: string;
  replayed: boolean;
  accepted: number;
  rejected: number;
}

/**
 * One message -> one transmission, through TransmissionsService.accept inside
 * IdempotencyService like POST /v1/transmissions: suppressions, sender-domain policy and events
 * all apply, and the accept shares the container's group commit (on SQLite, messages arriving
 * together are stored in one transaction; each 250 still follows the commit holding it).
 */
export async function submitMessage(c: Container, user: SmtpUser, raw: Buffer, envelope: Envelope): Promise<Submitted> {
  const prepared = prepareSubmission(raw, envelope);
  const res = await c.idempotency.execute(
    { tenantId: user.tenantId, scope: IDEMPOTENCY_SCOPE, key: prepared.idempotencyKey, body: prepared.fingerprint },
    async (trx) => ({ status: 202, body: await c.transmissions.accept(trx, user.tenantId, prepared.input) }),
    { runner: c.groupCommit.run },
  );
  const body = res.body as AcceptResult;
  return {
    transmissionId: body.transmission_id,
    replayed: res.replayed,
    accepted: body.total_accepted_recipients,
    rejected: body.total_rejected_recipients,
  };
}
