/**
 * Tracking tokens (docs/tracking.md "Tokens"): what `/o/<token>`, `/c/<token>` and `/u/<token>`
 * carry. A token is base64url(payload || mac), mac = first 16 bytes of HMAC-SHA256(key, payload):
 *
 *   version 1: 1 | kind (1: 0 open, 1 click, 2 unsubscribe) | message id (16, the UUID's bytes)
 *              [click only: link position (2, big-endian) | the link's URL (UTF-8)]
 *   version 2: 2 | 1 (click) | message id (16) | link position (2) | link reference (2)
 *
 * The key is derived from the master key with HKDF (info `postyard tracking token v1`), so it
 * signs nothing else and leaking one token key reveals nothing about the master key.
 *
 * Version 2 (clicks only, 51 characters): the reference is the link's row in its transmission's
 * link table (`tracking_links`, written at accept: tracking/links.ts), so the token does not grow
 * with the URL; the click looks the URL up. Version 1 click tokens carry their URL (about 1.4 x the
 * URL plus 46 characters): mail sent before version 2 has them, and a link whose URL was not known
 * at accept (built by the template language from a recipient's data) still gets one. Either way
 * only what Postyard signed is honoured, so the redirect only goes to a URL that was in the
 * message (no open redirect). Opens and unsubscribes stay version 1 (46 characters, no URL).
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

export type TokenKind = 'open' | 'click' | 'unsubscribe';

export interface TrackingToken {
  kind: TokenKind;
  messageId: string;
  /** Click only: the link's position among the message's tracked links (0-based). */
  link?: number;
  /** Click, version 1 only: where the link goes. */
  url?: string;
  /** Click, version 2 only: the link's index in its transmission's link table (tracking_links.idx). */
  ref?: number;
}

const VERSION = 1;
/** Click tokens that name a row of the transmission's link table instead of carrying the URL. */
const VERSION_LINK_REF = 2;
const CLICK = 1;
/** Length of a version 2 payload: version, kind, message id, position, reference. */
const LINK_REF_PAYLOAD = 22;
const KINDS: readonly TokenKind[] = ['open', 'click', 'unsubscribe'];
const MAC_BYTES = 16;
const UUID_HEX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Longest token accepted (a 4 KB URL and then some); anything longer is refused unread. */
export const MAX_TOKEN_CHARS = 6000;
export const MAX_LINKS = 0xffff;

function u16(n: number, what: string): Buffer {
  if (!Number.isInteger(n) || n < 0 || n > MAX_LINKS) throw new Error(`${what} out of range`);
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

/** The token key: HKDF-SHA256 of the master key, for this purpose only. */
export function deriveTokenKey(masterKey: Buffer | Uint8Array): Buffer {
  return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), 'postyard tracking token v1', 32));
}

function uuidBytes(id: string): Buffer {
  if (!UUID_HEX.test(id)) throw new Error(`not a message id: ${id}`);
  return Buffer.from(id.replace(/-/g, ''), 'hex');
}

function uuidText(b: Buffer): string {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function mac(key: Uint8Array, payload: Buffer): Buffer {
  return createHmac('sha256', key).update(payload).digest().subarray(0, MAC_BYTES);
}

/** A version 2 click token when `ref` is given, else version 1 (the URL in the token). */
export function signToken(key: Uint8Array, t: TrackingToken): string {
  let payload: Buffer;
  if (t.kind === 'click' && t.ref !== undefined) {
    const head = Buffer.from([VERSION_LINK_REF, CLICK]);
    payload = Buffer.concat([head, uuidBytes(t.messageId), u16(t.link ?? 0, 'link position'), u16(t.ref, 'link ref')]);
  } else {
    const head = Buffer.from([VERSION, KINDS.indexOf(t.kind)]);
    payload = Buffer.concat([head, uuidBytes(t.messageId)]);
    if (t.kind === 'click') {
      payload = Buffer.concat([payload, u16(t.link ?? 0, 'link position'), Buffer.from(t.url ?? '', 'utf8')]);
    }
  }
  return Buffer.concat([payload, mac(key, payload)]).toString('base64url');
}

/**
 * The token's content when its MAC is ours and its shape is sound; null otherwise (tampered,
 * truncated, signed with another key, or of the wrong kind). Constant-time MAC comparison.
 */
export function verifyToken(key: Uint8Array, token: string, expect: TokenKind): TrackingToken | null {
  if (token.length < 24 || token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) return null;
  const raw = Buffer.from(token, 'base64url');
  if (raw.length < 18 + MAC_BYTES) return null;
  const payload = raw.subarray(0, raw.length - MAC_BYTES);
  if (!timingSafeEqual(mac(key, payload), raw.subarray(raw.length - MAC_BYTES))) return null;
  if (KINDS[payload[1] ?? 99] !== expect) return null;
  const messageId = uuidText(payload.subarray(2, 18));
  if (payload[0] === VERSION_LINK_REF) {
    if (expect !== 'click' || payload.length !== LINK_REF_PAYLOAD) return null;
    return { kind: 'click', messageId, link: payload.readUInt16BE(18), ref: payload.readUInt16BE(20) };
  }
  if (payload[0] !== VERSION) return null;
  if (expect !== 'click') return payload.length === 18 ? { kind: expect, messageId } : null;
  if (payload.length < 20) return null;
  const url = payload.subarray(20).toString('utf8');
  return { kind: 'click', messageId, link: payload.readUInt16BE(18), url };
}

/**
 * The payload of a token known to be sound (no MAC check): for re-signing a placeholder token of
 * our own for each message (tracking/render-plan.ts messageToken), without decoding it again.
 */
export function tokenPayload(token: string): Buffer {
  const raw = Buffer.from(token, 'base64url');
  return raw.subarray(0, raw.length - MAC_BYTES);
}

/** The message id as the 16 bytes a token carries. */
export function messageIdBytes(messageId: string): Buffer {
  return uuidBytes(messageId);
}

/** `payload` (a token's, from tokenPayload) for another message: same version, kind, link, URL or ref. */
export function resignForMessage(key: Uint8Array, payload: Buffer, messageId: Buffer): string {
  const p = Buffer.from(payload);
  messageId.copy(p, 2);
  return Buffer.concat([p, mac(key, p)]).toString('base64url');
}
