import type { MessagesTable, TransmissionsTable } from '../../../db/schema.ts';
import { BoundedCache } from '../../../lib/bounded-cache.ts';
import { toCrlf } from '../../../lib/line-ends.ts';
import { OVER_TIME } from '../../content/template-budget.ts';
import { RenderError } from '../../content/template-language.ts';
import { fromDomainOf, parseStoredContent, type StoredContent } from '../../content/stored-content.ts';
import { dkimSign, dkimSignatureHeader } from './dkim.ts';
import { isStatic, mergeData, renderContent, storedKeys } from '../../content/render-content.ts';
import { fromSharedBody, messageBytes, type SharedInput } from './shared-body.ts';
import { buildMessage } from './mime.ts';
import { NO_BOUNCE_HOST } from '../../domains/dns-records.ts';
import type { SigningKey } from '../../domains/signing-key.ts';
import {
  applyTracking,
  messageTokens,
  perRecipient,
  rawHeaderLines,
  sharedTrackedParts,
  type TrackingPlan,
  withTrackingBase,
} from '../../tracking/render-plan.ts';

/** The DKIM key and bounce domain for a From domain (DomainsService.signingKeyFor). */
export type SigningKeyLookup = (tenantId: string, fromDomain: string) => Promise<SigningKey | null>;

export interface TransmissionForDelivery {
  id: string;
  content: StoredContent;
  /**
   * SMTP submissions: the message as submitted (Bcc and X-Postyard-Options already removed).
   * A Uint8Array on a render thread: structured clone does not keep Buffers (see asBuffer).
   */
  raw: Uint8Array | null;
  options: TransmissionOptions;
  /** fromDomainOf(content), decided once per transmission (content/stored-content.ts). */
  fromDomain: string | null;
  /**
   * The transmission has one recipient: its message is composed on its own, never through a
   * shared body (shared-body.ts), which would be composed for that one message and then kept by
   * the render thread where nothing reads it again.
   */
  single?: boolean;
}

/** The stored options, and the tracking plan the delivery worker adds (tracking/render-plan.ts). */
export interface TransmissionOptions {
  sandbox?: boolean;
  open_tracking?: boolean;
  click_tracking?: boolean;
  tracking?: TrackingPlan | null;
  /** The transmission's link table (not enumerable: see forDelivery). */
  readonly tracking_links?: readonly string[];
}

/**
 * A transmissions row as the renderer takes it: content parsed and the From domain decided, once.
 * `tracking_links` (queue.repo.ts loadTransmission) rides on the options for trackingPlan, which
 * puts it in the plan; it is not enumerable, so the options copied into every render request do
 * not carry the list a second time.
 */
export function forDelivery(
  row: Pick<TransmissionsTable, 'id' | 'content' | 'raw_message' | 'options'> & {
    tracking_links?: readonly string[] | null;
    total_accepted?: number;
  },
): TransmissionForDelivery {
  const content = parseStoredContent(row.content);
  const options = JSON.parse(row.options) as TransmissionOptions;
  if (row.tracking_links) Object.defineProperty(options, 'tracking_links', { value: row.tracking_links });
  return {
    id: row.id,
    content,
    raw: row.raw_message ? Buffer.from(row.raw_message, 'base64') : null,
    options,
    fromDomain: fromDomainOf(content),
    ...(row.total_accepted !== undefined && row.total_accepted <= 1 ? { single: true } : {}),
  };
}

/** Everything a render needs, as plain data (it crosses to a render thread by structured clone). */
export interface RenderRequest {
  msg: MessagesTable;
  tx: TransmissionForDelivery;
  key: SigningKey | null;
  /** The signed VERP token of msg.id (src/modules/outcomes/verp.ts), made where the master key is. */
  verpToken: string;
  /** POSTYARD_BOUNCE_HOST: the return-path domain when the From domain has no signing key. */
  bounceHost: string;
}

export interface RenderedMessage {
  envelopeFrom: string;
  raw: Buffer;
  signed: boolean;
  /**
   * Time spent building this message and, of that, signing it (ms), measured on the thread that
   * did it and carried back with the bytes, so the main registry sees render threads' work.
   */
  renderMs?: number;
  dkimMs?: number;
}

/**
 * Bytes as a Buffer over the same memory. A Buffer sent to a render thread arrives as a plain
 * Uint8Array, whose toString() is "70,114,111,..." rather than the text: every byte-level read
 * on the render path must go through here (Date and Message-ID were added a
 * second time because ensureHeaders could not find them in that string).
 */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The header section of a message (latin1 text), for header presence checks. */
function headOf(raw: Buffer): string {
  const text = raw.subarray(0, 64 * 1024).toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  return end >= 0 ? text.slice(0, end) : text;
}

/** Adds Message-ID and Date to a submitted message that lacks them (RFC 5322 requires Date). */
function ensureHeaders(raw: Buffer, messageId: string): Buffer {
  const text = raw.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const head = end >= 0 ? text.slice(0, end) : text;
  const add: string[] = [];
  if (!/^message-id:/im.test(head)) add.push(`Message-ID: <${messageId}>`);
  if (!/^date:/im.test(head)) add.push(`Date: ${new Date().toUTCString().replace('GMT', '+0000')}`);
  if (add.length === 0) return raw;
  return Buffer.concat([Buffer.from(`${add.join('\r\n')}\r\n`, 'latin1'), raw]);
}

/**
 * Turns a queued message into the bytes that leave: the content rendered by the template
 * language with the recipient's data over the transmission's (docs/templates.md), MIME, Message-ID `<message id>@<from domain>`, Return-Path (envelope sender)
 * `bounces+<signed VERP token>@<return-path domain>` so asynchronous bounces can be matched (and
 * not forged, src/modules/outcomes/verp.ts), and the DKIM signature of the From domain's key.
 * The return-path domain is the sending domain's (its `bounces.` record once verified, else the
 * bounce host: domains.service.ts signingKeyFor) or, for a From domain that is not a registered
 * sending domain, `bounceHost`: not the From domain, whose MX is not ours (docs/inbound.md).
 * Only while no bounce host is configured at all (the `localhost` placeholder, development) is it
 * the From domain: `bounces+...@localhost` would be refused by receivers that check the sender's
 * domain, and nothing of ours could receive the bounces there either.
 */
export async function renderMessage(
  msg: MessagesTable,
  tx: TransmissionForDelivery,
  key: SigningKey | null,
  verpToken: string,
  bounceHost: string,
): Promise<RenderedMessage> {
  const slow = overTimeRenders.get(tx.id);
  if (slow && slow.count >= OVER_TIME_LIMIT) throw new RenderError(slow.part, `${slow.detail}${SKIPPED}`);
  try {
    return await buildRendered(msg, tx, key, verpToken, bounceHost);
  } catch (err) {
    if (err instanceof RenderError && err.detail.startsWith(OVER_TIME)) {
      const seen = overTimeRenders.get(tx.id);
      overTimeRenders.set(tx.id, { part: err.part, detail: err.detail, count: (seen?.count ?? 0) + 1 });
    }
    throw err;
  }
}

/**
 * Messages of a transmission whose rendering ran out of its time budget (template-budget.ts) this
 * many times fail at once, without rendering: a tenant's slow template costs a render thread two
 * budgets per transmission, not one per message, and so cannot hold another tenant's mail behind
 * a thousand of its own (one or two recipients whose data is unusual do not condemn the rest).
 */
const OVER_TIME_LIMIT = 2;
const SKIPPED = ` (${OVER_TIME_LIMIT} messages of this transmission did; the others fail without rendering)`;
const overTimeRenders = new BoundedCache<string, { part: string; detail: string; count: number }>(1_000);

async function buildRendered(
  msg: MessagesTable,
  tx: TransmissionForDelivery,
  key: SigningKey | null,
  verpToken: string,
  bounceHost: string,
): Promise<RenderedMessage> {
  const started = performance.now();
  const fromDomain = tx.fromDomain ?? 'localhost';
  const messageId = `${msg.id}@${fromDomain}`;
  const returnPathDomain = key?.returnPathDomain ?? (bounceHost === NO_BOUNCE_HOST ? fromDomain : bounceHost);
  const plan = withTrackingBase(tx.options.tracking ?? null, key?.trackingBase);
  const envelopeFrom = `bounces+${verpToken}@${returnPathDomain}`;
  // CRLF lines only, before signing (src/lib/line-ends.ts): submission normalises already, this
  // covers messages stored before it did.
  if (tx.raw) {
    const raw = ensureHeaders(toCrlf(asBuffer(tx.raw)), messageId);
    const top = rawHeaderLines(plan, msg.id, headOf(raw), returnPathDomain);
    return sign(envelopeFrom, top ? Buffer.concat([Buffer.from(top, 'latin1'), raw]) : raw, key, started);
  }
  const c = tx.content;
  const to = { email: msg.recipient, ...(msg.recipient_name ? { name: msg.recipient_name } : {}) };
  const personal = msg.substitution_data ? (JSON.parse(msg.substitution_data) as Record<string, unknown>) : null;
  // A group message's copies all show its To and Cc, whoever receives them (bcc recipients are in
  // neither). At most 50 copies: each is composed in full, not through a shared body, whose one
  // To line is the recipient's own.
  if (c.group) {
    const input = applyTracking(plan, msg.id, composeInput(tx.id, c, personal), returnPathDomain);
    return sign(
      envelopeFrom,
      await buildMessage({ ...input, to: c.group.to, cc: c.group.cc, messageId }),
      key,
      started,
    );
  }
  // Without data of its own (or with content that uses no language) a recipient gets the same
  // body as every such recipient: compose it once per transmission (shared-body.ts).
  // Opens, clicks and List-Unsubscribe carry the message's own tokens: the shared body then holds
  // placeholder tokens, each message's own written over them (tracking/render-plan.ts).
  if (!tx.single && (personal === null || isStatic(c))) {
    const tracked = perRecipient(plan) ? plan : null;
    const parts = await fromSharedBody(
      // The tracking base is in the composed body: a tracking host name verified or removed while
      // a transmission is being sent gives the rest of its messages a body of their own.
      tracked ? `${tx.id} ${tracked.base}` : tx.id,
      to,
      messageId,
      () =>
        tracked
          ? sharedTrackedParts(tracked, composeInput(tx.id, c, null), returnPathDomain)
          : applyTracking(plan, null, composeInput(tx.id, c, null), returnPathDomain),
      undefined,
      tracked ? (markers) => messageTokens(tracked, markers, msg.id) : undefined,
    );
    if (parts) {
      const signing = performance.now();
      const signature = key ? dkimSignatureHeader(parts.head, parts.bodyHash, signOptions(key)) : '';
      const dkimMs = performance.now() - signing;
      const head = Buffer.from(`${signature}${parts.head}\r\n\r\n`, 'latin1');
      const raw = messageBytes(parts, head);
      const renderMs = performance.now() - started;
      return { envelopeFrom, raw, signed: key !== null, renderMs, ...(key ? { dkimMs } : {}) };
    }
  }
  const input = applyTracking(plan, msg.id, composeInput(tx.id, c, personal), returnPathDomain);
  return sign(envelopeFrom, await buildMessage({ ...input, to, messageId }), key, started);
}

/**
 * What MailComposer gets: the content rendered with the recipient's data over the
 * transmission's (which is over the template's defaults). Throws RenderError (`render_failed:`).
 */
function composeInput(transmissionId: string, c: StoredContent, personal: Record<string, unknown> | null): SharedInput {
  const r = renderContent(c, mergeData(c.substitution_data, personal), storedKeys(transmissionId, c));
  return {
    from: r.from ?? c.from,
    ...(r.reply_to ? { replyTo: r.reply_to } : {}),
    subject: r.subject,
    ...(r.text !== null ? { text: r.text } : {}),
    ...(r.html !== null ? { html: r.html } : {}),
    headers: r.headers,
    attachments: c.attachments.map((a) => ({
      filename: a.filename,
      contentType: a.content_type,
      content: Buffer.from(a.data, 'base64'),
      ...(a.content_id !== undefined ? { cid: a.content_id } : {}),
    })),
  };
}

function signOptions(key: SigningKey) {
  // dkim.ts parses each PEM once and keeps the KeyObject (parsing costs about a signature).
  return { domainName: key.domainName, keySelector: key.keySelector, privateKey: key.privateKeyPem };
}

function sign(envelopeFrom: string, raw: Buffer, key: SigningKey | null, started: number): RenderedMessage {
  if (!key) return { envelopeFrom, raw, signed: false, renderMs: performance.now() - started };
  const signing = performance.now();
  const signed = dkimSign(raw, signOptions(key));
  const end = performance.now();
  return { envelopeFrom, raw: signed, signed: true, renderMs: end - started, dkimMs: end - signing };
}
