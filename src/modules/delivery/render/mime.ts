/**
 * Builds the RFC 5322 message of one delivery (content already rendered by the template
 * language: src/modules/content/template-language.ts, render-content.ts).
 *
 * Design notes
 * - MIME is nodemailer's MailComposer: battle-tested multipart/alternative and multipart/mixed
 *   trees, quoted-printable/base64 transfer encodings, RFC 2047 encoded words for UTF-8 subjects
 *   and display names, and line folding. We only map our input onto it.
 * - File and URL access are turned off: attachments arrive as bytes, and a path or URL smuggled
 *   into the options must never make the worker read the disk or fetch from the network.
 * - Custom headers cannot replace the structure or identity of the message (Content-Type,
 *   From, Message-ID, DKIM-Signature, ...): those are dropped here as defence in depth; the API
 *   is expected to refuse them earlier with 422 (the rules: content/stored-content.ts).
 */
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { parseMailbox } from '../../../lib/email.ts';
import { textToCrlf, toCrlf } from '../../../lib/line-ends.ts';
import { isReservedHeader } from '../../content/stored-content.ts';

export interface MessageAttachment {
  filename: string;
  contentType: string;
  content: Buffer;
  /** An inline part: with the HTML in multipart/related, `Content-ID: <cid>`. */
  cid?: string;
}

/** One mailbox of To or Cc. */
export interface MessageAddress {
  email: string;
  name?: string | null;
}

export interface BuildMessageInput {
  /** 'a@b.example' or 'Name <a@b.example>' (UTF-8 names are fine). */
  from: string;
  /**
   * The recipient of this copy, or a group message's To list (every copy shows the same; empty:
   * `To: "undisclosed-recipients":;`).
   */
  to: MessageAddress | readonly MessageAddress[];
  /** A group message's Cc list. Bcc recipients are never given: no copy may name them. */
  cc?: readonly MessageAddress[];
  replyTo?: string;
  subject: string;
  text?: string;
  html?: string;
  headers?: Record<string, string>;
  attachments?: MessageAttachment[];
  /** Without angle brackets, e.g. '0193...@mail.example.com'. */
  messageId: string;
  /** Default: now. */
  date?: Date;
  /** Full List-Unsubscribe value, e.g. '<https://x/u/1>, <mailto:u@x?subject=1>'. */
  listUnsubscribe?: string;
  /** Adds `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058); default false. */
  listUnsubscribeOneClick?: boolean;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: replacing them is the point
const CONTROL = /[\u0000-\u001f\u007f]+/g;

/** Header text with control characters turned into spaces (MailComposer would encode them). */
function headerText(value: string): string {
  return value.replace(CONTROL, ' ');
}

/**
 * An 8bit message/* attachment is sent as its bytes (RFC 2046 forbids base64 there), line ends
 * made CRLF with the rest of the message; one holding NUL, which no SMTP data may carry, is
 * base64-encoded instead. Every other attachment is base64 (MailComposer's default).
 */
function attachmentEncoding(a: MessageAttachment): { contentTransferEncoding: 'base64' } | Record<string, never> {
  return /^message\//i.test(a.contentType) && a.content.includes(0) ? { contentTransferEncoding: 'base64' } : {};
}

/**
 * From and Reply-To go to MailComposer as one parsed {name, address}, never as a string it would
 * parse again (it accepts address lists): the header is built from exactly what was checked. A
 * value that is not one acceptable mailbox (e.g. stored before accept-time parsing) is not sent.
 */
function oneMailbox(value: string, header: string): { name: string; address: string } {
  const m = parseMailbox(value);
  if (!m) throw new Error(`${header} is not exactly one acceptable mailbox`);
  return { name: m.name ?? '', address: m.email };
}

/** The To of a group message without `to` recipients: RFC 5322's empty group (MailComposer quotes the name). */
const UNDISCLOSED = 'undisclosed-recipients:;';

/** An address as MailComposer takes it: the name cleaned of control characters, the address as checked. */
function composerAddress(a: MessageAddress): string | { name: string; address: string } {
  return a.name ? { name: headerText(a.name), address: a.email } : a.email;
}

/** Composes the message. Resolves to the raw bytes, CRLF line endings, ready for DKIM and DATA. */
export async function buildMessage(input: BuildMessageInput): Promise<Buffer> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (!isReservedHeader(name)) headers[name] = headerText(value);
  }
  if (input.listUnsubscribe) {
    headers['List-Unsubscribe'] = input.listUnsubscribe;
    if (input.listUnsubscribeOneClick) headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
  }

  const composer = new MailComposer({
    from: oneMailbox(input.from, 'From'),
    to: Array.isArray(input.to)
      ? // A group message whose recipients are all cc or bcc: the empty group of RFC 5322 A.1.3.
        input.to.length
        ? input.to.map(composerAddress)
        : UNDISCLOSED
      : composerAddress(input.to as MessageAddress),
    ...(input.cc?.length ? { cc: input.cc.map(composerAddress) } : {}),
    ...(input.replyTo !== undefined ? { replyTo: oneMailbox(input.replyTo, 'Reply-To') } : {}),
    // A substituted subject may carry control characters from substitution_data.
    subject: headerText(input.subject),
    // Lines end in CRLF before encoding: a bare CR would pass quoted-printable and 7bit as is.
    ...(input.text !== undefined ? { text: textToCrlf(input.text) } : {}),
    ...(input.html !== undefined ? { html: textToCrlf(input.html) } : {}),
    headers,
    attachments: (input.attachments ?? []).map((a) => ({
      filename: a.filename,
      contentType: a.contentType,
      content: a.content,
      ...attachmentEncoding(a),
      // MailComposer puts attachments with a cid beside the HTML in multipart/related.
      ...(a.cid !== undefined ? { cid: a.cid, contentDisposition: 'inline' as const } : {}),
    })),
    messageId: `<${input.messageId}>`,
    date: input.date ?? new Date(),
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  // CRLF line ends throughout (src/lib/line-ends.ts says why): MailComposer keeps a 7bit part's
  // bare LFs, and an 8bit message/* attachment's line ends, as given.
  return toCrlf(await composer.compile().build());
}
