/**
 * The content format: `ContentFields`, the fields every message content has (a transmission's,
 * a template version's, a render's input and output), and what `transmissions.content` holds
 * (JSON), written by the accept path (transmissions, SMTP submission) and read by delivery
 * (render) and the API views. One owner, so the writer and the readers cannot drift apart; the
 * header-name rules live here too, since the accept path refuses what the renderer would
 * otherwise drop (docs/api.md "content.headers").
 */
import { parseMailbox } from '../../lib/email.ts';

/**
 * The one shape of message content. Each use narrows it: stored content always has a From, a
 * template version and a render always have a subject; requests and checks take it partial.
 */
export interface ContentFields {
  subject: string | null;
  text: string | null;
  html: string | null;
  from: string | null;
  reply_to: string | null;
  headers: Record<string, string>;
}

export interface StoredAttachment {
  filename: string;
  content_type: string;
  /** base64 */
  data: string;
  /** An inline part of the HTML (`multipart/related`), referenced there as `cid:<content_id>`. */
  content_id?: string;
}

/**
 * How a recipient was addressed: `to` (the default), `cc`, or `bcc` (in no header). Any `cc` or
 * `bcc` recipient makes the transmission a group message (GroupHeaders).
 */
export type RecipientRole = 'to' | 'cc' | 'bcc';

/** One mailbox of a group message's To or Cc header. */
export interface GroupAddress {
  email: string;
  name: string | null;
}

/**
 * The headers every copy of a group message shows (a transmission with `cc` or `bcc`
 * recipients): `to` and `cc` in request order, duplicates left out; `bcc` recipients are in
 * neither, so no copy names them.
 */
export interface GroupHeaders {
  to: GroupAddress[];
  cc: GroupAddress[];
}

/** What is persisted as transmissions.content (JSON). */
export interface StoredContent extends ContentFields {
  from: string;
  attachments: StoredAttachment[];
  template_id: string | null;
  /** With template_id: the version copied into this content (docs/templates.md "Sending"). */
  template_version?: number | null;
  /** Transmission `substitution_data` over the template's defaults; each recipient's goes over it. */
  substitution_data?: Record<string, unknown> | null;
  /** A group message's To and Cc; absent: each copy is addressed to its recipient alone. */
  group?: GroupHeaders | null;
}

/** A `transmissions.content` column value, as written by the accept path. */
export function parseStoredContent(json: string): StoredContent {
  return JSON.parse(json) as StoredContent;
}

/**
 * The domain of the From address (null when it has none). Delivery decides it once per
 * transmission, when the transmission is loaded, and uses it for the Message-ID, the Return-Path
 * fallback and the signing-key lookup of every message.
 */
export function fromDomainOf(content: Pick<StoredContent, 'from'>): string | null {
  return parseMailbox(content.from)?.email.split('@')[1] ?? null;
}

/**
 * Headers a caller may not set: they define the message's structure, identity or route. The
 * API refuses them with 422 (transmissions.validate.ts) and buildMessage drops them as a backstop.
 */
export const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'sender',
  // Who resent the message (RFC 5322 3.6.6): an identity like From and Sender, which the API
  // sets only from checked values.
  'resent-from',
  'resent-sender',
  'reply-to',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
  'dkim-signature',
  'return-path',
  'received',
  'list-unsubscribe',
  'list-unsubscribe-post',
  'x-postyard-options',
]);

/** RFC 5322 field-name: printable ASCII except ':'. */
export const HEADER_NAME = /^[!-9;-~]+$/;

/** True when `name` is not a valid header name or is one the system sets itself. */
export function isReservedHeader(name: string): boolean {
  return !HEADER_NAME.test(name) || RESERVED_HEADERS.has(name.toLowerCase());
}
