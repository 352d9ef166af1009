/**
 * Tracking tokens (docs/tracking.md "Tokens"): what `/o/<token>`, `/c/<token>` and `/u/<token>`
 * carry. A token is base64url(payload || mac):
 *
 *   payload = version (1) | kind (1: 0 open, 1 click, 2 unsubscribe) | message id (16, the UUID's bytes)
 *             [click only: link index (2, big-endian) | the link's URL (UTF-8)]
 *   mac     = first 16 bytes of HMAC-SHA256(key, payload)
 *
 * The key is derived from the master key with HKDF (info `postyard tracking token v1`), so it
 * signs nothing else and leaking one token key reveals nothing about the master key.
 *
 * A click token carries its URL: only what Postyard signed is ever honoured, so the redirect can
 * only go to a URL that was in the message (no open redirect), and no per-link rows are stored
 * at send time. The cost is a longer link (about 1.4 x the URL plus 46 characters).
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

export type TokenKind = 'open' | 'click' | 'unsubscribe';

export interface TrackingToken {
  kind: TokenKind;
  messageId: string;
  /** Click only: the link's position among the message's tracked links (0-based). */
  link?: number;
  /** Click only: where the link goes. */
  url?: string;
}

const VERSION = 1;
const KINDS: readonly TokenKind[] = ['open', 'click', 'unsubscribe'];
const MAC_BYTES = 16;
const UUID_HEX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Longest token accepted (a 4 KB URL and then some); anything longer is refused unread. */
export const MAX_TOKEN_CHARS = 6000;
export const MAX_LINKS = 0xffff;

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

export function signToken(key: Uint8Array, t: TrackingToken): string {
  const head = Buffer.from([VERSION, KINDS.indexOf(t.kind)]);
  let payload = Buffer.concat([head, uuidBytes(t.messageId)]);
  if (t.kind === 'click') {
    const link = t.link ?? 0;
    if (!Number.isInteger(link) || link < 0 || link > MAX_LINKS) throw new Error('link index out of range');
    const idx = Buffer.alloc(2);
    idx.writeUInt16BE(link);
    payload = Buffer.concat([payload, idx, Buffer.from(t.url ?? '', 'utf8')]);
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
  if (payload[0] !== VERSION || KINDS[payload[1] ?? 99] !== expect) return null;
  const messageId = uuidText(payload.subarray(2, 18));
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

/** `payload` (a token's, from tokenPayload) for another message: same kind, link and URL. */
export function resignForMessage(key: Uint8Array, payload: Buffer, messageId: Buffer): string {
  const p = Buffer.from(payload);
  messageId.copy(p, 2);
  return Buffer.concat([p, mac(key, p)]).toString('base64url');
}
