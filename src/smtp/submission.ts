import { isAscii } from 'node:buffer';
import { createHash } from 'node:crypto';
import addressparser from 'nodemailer/lib/addressparser/index.js';
import type { Container } from '../container.ts';
import {
  checkMailbox,
  decodeWords,
  domainOf,
  formatMailbox,
  isValidEmail,
  type Mailbox,
  nameShowsOtherAddress,
  normalizeEmail,
} from '../lib/email.ts';
import { newId } from '../lib/ids.ts';
import { toCrlf } from '../lib/line-ends.ts';
import type { AcceptResult } from '../modules/transmissions/transmissions.service.ts';
import type { AcceptInput } from '../modules/transmissions/transmissions.validate.ts';
import { applyTemplateToSubmission } from '../modules/content/send-content.ts';
import type { GroupAddress, GroupHeaders, RecipientRole } from '../modules/content/stored-content.ts';
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
  /** X-Postyard-Options `template_id`: the content comes from this stored template. */
  template: { id: string; useDraft: boolean; data: Record<string, unknown> | undefined } | null;
}

/** Idempotency scope of SMTP submissions: keys never collide with the HTTP API's. */
export const IDEMPOTENCY_SCOPE = 'SMTP submission';

/** Never delivered: (Resent-)Bcc would reveal the blind recipients, the options header is for Postyard only. */
const STRIPPED = new Set(['bcc', 'resent-bcc', OPTIONS_HEADER]);
/** Set per attempt by most clients, so a retry of the same message differs only in these. */
const VOLATILE = new Set(['date', 'message-id']);

function rfc5322Date(d: Date): string {
  return d.toUTCString().replace(/GMT$/, '+0000');
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping them is the point
const CONTROL = /[\u0000-\u001f\u007f]+/g;

/** RFC 2047 encoded words (which nodemailer uses for any long or non-ASCII header) decoded. */
export const decodeHeader = decodeWords;

/** Every mailbox of an address field (groups flattened), names decoded. */
function mailboxes(field: HeaderField | undefined): { name: string; address: string }[] {
  if (!field) return [];
  return addressparser(field.value, { flatten: true }).map((a) => ({
    name: decodeHeader(a.name ?? ''),
    address: a.address.trim(),
  }));
}

/**
 * The identities the message claims: every From mailbox and the Sender must be a
 * valid address whose display name shows no other address; the sender policy then checks each
 * domain (550 5.7.1 when one is not the tenant's), not only the first From's. Resent-From and
 * Resent-Sender (RFC 5322 3.6.6, one block per resending, so each may appear more than once)
 * claim who sent the message as much as From and Sender do, and are held to the same rules.
 * The first From mailbox's domain comes first (the sender policy's From).
 */
function senderIdentity(h: MessageHeaders): { from: Mailbox; domains: string[] } {
  if (countHeader(h, 'sender') > 1) throw reply.malformed('The message has more than one Sender header');
  const from = mailboxes(findHeader(h, 'from'));
  const sender = mailboxes(findHeader(h, 'sender'));
  if (sender.length > 1) throw reply.malformed('The Sender header must hold one address');
  const resentFrom = h.fields.filter((f) => f.name === 'resent-from').flatMap((f) => mailboxes(f));
  const resentSenders = h.fields.filter((f) => f.name === 'resent-sender').map((f) => mailboxes(f));
  if (resentSenders.some((list) => list.length !== 1))
    throw reply.malformed('Each Resent-Sender header must hold one address');
  const domains: string[] = [];
  for (const [header, list] of [
    ['From', from],
    ['Sender', sender],
    ['Resent-From', resentFrom],
    ['Resent-Sender', resentSenders.flat()],
  ] as const) {
    for (const m of list) {
      if (!isValidEmail(m.address))
        throw reply.badSender(`The ${header} header needs valid addresses like "Name <user@example.com>"`);
      if (nameShowsOtherAddress(m.name, m.address))
        throw reply.policy(`The ${header} header's display name shows an address other than its own`);
      domains.push(domainOf(m.address));
    }
  }
  const first = from[0];
  if (!first) throw reply.badSender('The From header needs a valid address like "Name <user@example.com>"');
  // Stored (and read back by delivery for the DKIM domain) in the API's form, so it must parse.
  const stored = checkMailbox(formatMailbox({ name: first.name, email: first.address }));
  if ('error' in stored) throw reply.badSender(`The From header: ${stored.error}`);
  return { from: stored.mailbox, domains: [...new Set(domains)] };
}

/**
 * How each envelope recipient was addressed, for its message row and events (the message itself
 * is delivered as written): named in To, in Cc, or in neither (bcc). Only a group message has
 * roles, as in the API: one with a Cc or Bcc header, or with an envelope recipient that no To or
 * Cc header names; for any other submission every recipient's role is null. `group`: the To and
 * Cc a template's copies show when X-Postyard-Options names one (the submitted MIME is replaced).
 */
function envelopeRoles(
  h: MessageHeaders,
  rcptTo: readonly string[],
): { roleOf: (email: string) => RecipientRole | null; group: GroupHeaders | null } {
  const named = (header: string): GroupAddress[] =>
    h.fields
      .filter((f) => f.name === header)
      .flatMap((f) => mailboxes(f))
      .filter((m) => isValidEmail(m.address))
      .map((m) => ({ email: m.address, name: m.name.replace(CONTROL, ' ').trim() || null }));
  const group = { to: named('to'), cc: named('cc') };
  const to = new Set(group.to.map((m) => m.email.toLowerCase()));
  const cc = new Set(group.cc.map((m) => m.email.toLowerCase()));
  const role = (email: string): RecipientRole => {
    const key = email.toLowerCase();
    return to.has(key) ? 'to' : cc.has(key) ? 'cc' : 'bcc';
  };
  const grouped =
    cc.size > 0 ||
    h.fields.some((f) => f.name === 'bcc' || f.name === 'resent-bcc') ||
    rcptTo.some((email) => role(email) === 'bcc');
  return grouped ? { roleOf: role, group } : { roleOf: () => null, group: null };
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
export function prepareSubmission(received: Buffer, envelope: Envelope): PreparedSubmission {
  // What is stored is what may leave: no NUL, CRLF lines only (src/lib/line-ends.ts),
  // normalised before the header split so a bare CR cannot hide a field from it.
  if (received.includes(0)) throw reply.nulByte();
  const raw = toCrlf(received);
  let h: MessageHeaders;
  try {
    h = parseHeaders(raw);
  } catch (err) {
    if (err instanceof MalformedMessageError) throw reply.malformed(`Malformed message: ${err.message}`);
    throw err;
  }
  if (!isAscii(raw.subarray(0, h.headerEnd))) throw reply.nonAsciiHeader();
  if (countHeader(h, OPTIONS_HEADER) > 1) throw reply.malformed('X-Postyard-Options may appear only once');
  const optionsField = findHeader(h, OPTIONS_HEADER);
  const options = parseOptions(optionsField && decodeHeader(optionsField.value));
  const fromCount = countHeader(h, 'from');
  if (fromCount === 0) throw reply.malformed('The message has no From header');
  if (fromCount > 1) throw reply.malformed('The message has more than one From header');

  const identity = senderIdentity(h);
  const fromDomain = domainOf(identity.from.email);
  const replyToBox = mailboxes(findHeader(h, 'reply-to')).find((m) => isValidEmail(m.address));
  const replyTo = replyToBox ? replyToBox.address : null;

  // RFC 6409 section 8: a submission server may add a missing Date and Message-ID.
  const added: string[] = [];
  if (!findHeader(h, 'date')) added.push(`Date: ${rfc5322Date(new Date())}`);
  if (!findHeader(h, 'message-id')) added.push(`Message-ID: <${newId()}@${fromDomain}>`);
  const stripped = rewriteMessage(raw, h, (f: HeaderField) => STRIPPED.has(f.name), added);

  const { roleOf, group } = envelopeRoles(h, envelope.rcptTo);
  const recipients = envelope.rcptTo.map((email) => ({
    email: normalizeEmail(email),
    name: null,
    substitutionData: null,
    metadata: options.metadata,
    role: roleOf(email),
  }));
  const subjectField = findHeader(h, 'subject');
  // Shown by the API; a decoded encoded-word could hide a line break.
  const subject = subjectField ? decodeHeader(subjectField.value).replace(CONTROL, ' ') : null;
  const input: AcceptInput = {
    source: 'smtp',
    recipients,
    content: {
      subject,
      from: formatMailbox(identity.from),
      reply_to: replyTo,
      text: null,
      html: null,
      headers: {},
      attachments: [],
      template_id: null,
      ...(group ? { group } : {}),
    },
    rawMessage: stripped,
    mailType: options.mailType,
    tags: options.tags,
    metadata: options.metadata,
    // The MIME is delivered as sent: no link or pixel rewriting for SMTP submissions.
    options: { sandbox: false, open_tracking: false, click_tracking: false },
    startTime: null,
    ipPool: options.ipPool ?? null,
    senderDomains: identity.domains,
  };
  return {
    input,
    idempotencyKey: options.idempotencyKey,
    fingerprint: options.idempotencyKey ? fingerprint(raw, h, envelope, options) : null,
    template: options.templateId
      ? { id: options.templateId, useDraft: options.useDraft, data: options.substitutionData }
      : null,
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
 * all apply, and the accept shares the container's group commit (on both databases, messages arriving
 * together are stored in one transaction; each 250 still follows the commit holding it).
 */
export async function submitMessage(c: Container, user: SmtpUser, raw: Buffer, envelope: Envelope): Promise<Submitted> {
  const prepared = prepareSubmission(raw, envelope);
  if (prepared.template) {
    const { id, useDraft, data } = prepared.template;
    const template = await c.templates.forSend(user.tenantId, id, useDraft);
    prepared.input = applyTemplateToSubmission(prepared.input, id, template, data);
  }
  const res = await c.idempotency.execute(
    { tenantId: user.tenantId, scope: IDEMPOTENCY_SCOPE, key: prepared.idempotencyKey, body: prepared.fingerprint },
    async (trx) => ({ status: 202, body: await c.transmissions.accept(trx, user.tenantId, prepared.input) }),
    // Without a key the work only reads and inserts: on PostgreSQL its batch opens no
    // transaction (src/db/group-commit.ts runInserts); with one it also completes the key.
    { runner: prepared.idempotencyKey === undefined ? c.groupCommit.runInserts : c.groupCommit.runBuffered },
  );
  // The worker of this process claims the new mail now, not at its next poll.
  c.transmissions.queued();
  const body = res.body as AcceptResult;
  return {
    transmissionId: body.transmission_id,
    replayed: res.replayed,
    accepted: body.total_accepted_recipients,
    rejected: body.total_rejected_recipients,
  };
}
