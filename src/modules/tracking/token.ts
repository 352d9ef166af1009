/**
 * Tracking tokens (docs/tracking.md "Tokens"): what `/o/<token>`, `/c/<token>` and `/u/<token>`
 * carry. A token is base64url(payload || mac), 16 bytes of mac:
 *
 *   version 1: 1 | kind (1: 0 open, 1 click, 2 unsubscribe) | message id (16, the UUID's bytes)
 *              [click only: link position (2, big-endian) | the link's URL (UTF-8)]
 *              mac = first 16 bytes of HMAC-SHA256(key, payload)
 *   version 2: 2 | 1 (click) | message id (16) | link position (2) | link reference (2)
 *              mac as version 1
 *   version 3: 3 | kind | message id (16) [click only: link position (2) | link reference (2)]
 *              mac = AES-256(message key, block), message key = HMAC-SHA256(key, 3 | message id),
 *              block = 3 | kind | position (2) | reference (2) | ten zero bytes
 *
 * The key is derived from the master key with HKDF (info `postyard tracking token v1`), so it
 * signs nothing else and leaking one token key reveals nothing about the master key.
 *
 * Version 3 (what the renderer signs since the render-cost work): one HMAC per message
 * instead of one per token. A message's ~21 tokens cost 21 HMAC-SHA256 (each a key schedule of
 * two SHA-256 blocks plus the payload) and were the largest cost tracking added to a render; now
 * the message key is one HMAC, and every tag of the message is one AES block of one cipher call.
 * Why it is as strong: the message key is a PRF (HMAC-SHA256) output of the secret token key on an
 * input no version 1 or 2 payload can be (those start with 1 or 2), and is never published; AES
 * under an unknown key is a pseudorandom permutation, so its output on a single fixed-length
 * block is a secure 128-bit MAC (the same tag length as before). A token of one link or message
 * tells nothing about the tag of another link (another block) or message (another key).
 *
 * Version 2 (clicks, 51 characters): the reference is the link's row in its transmission's link
 * table (`tracking_links`, written at accept: tracking/links.ts), so the token does not grow with
 * the URL; the click looks the URL up. Version 3 click tokens name the row the same way. Version 1
 * click tokens carry their URL (about 1.4 x the URL plus 46 characters): mail sent before version
 * 2 has them, and a link whose URL was not known at accept (built by the template language from a
 * recipient's data) still gets one. Either way only what Postyard signed is honoured, so the
 * redirect only goes to a URL that was in the message (no open redirect). Opens and unsubscribes
 * are 46 characters in versions 1 and 3. Every version is accepted: mail already sent keeps working.
 */
import { createCipheriv, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

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
/** Tags from a per-message key (one HMAC per message, one AES block per token). */
const VERSION_MESSAGE_KEY = 3;
/** Length of a version 2 payload: version, kind, message id, position, reference. */
const LINK_REF_PAYLOAD = 22;
/** Version 3 payloads: opens and unsubscribes (version, kind, message id); clicks add position and reference. */
const V3_SHORT_PAYLOAD = 18;
const V3_CLICK_PAYLOAD = 22;
const KINDS: readonly TokenKind[] = ['open', 'click', 'unsubscribe'];
const MAC_BYTES = 16;
const BLOCK = 16;
const UUID_HEX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Longest token accepted (a 4 KB URL and then some); anything longer is refused unread. */
export const MAX_TOKEN_CHARS = 6000;
export const MAX_LINKS = 0xffff;

function checkU16(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 0 || n > MAX_LINKS) throw new Error(`${what} out of range`);
  return n;
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

/** Versions 1 and 2. */
function mac(key: Uint8Array, payload: Buffer): Buffer {
  return createHmac('sha256', key).update(payload).digest().subarray(0, MAC_BYTES);
}

/** Version 3: the message's key, HMAC-SHA256(key, 3 | message id); never leaves this module. */
function messageKey(key: Uint8Array, messageId: Buffer): Buffer {
  return createHmac('sha256', key)
    .update(Buffer.from([VERSION_MESSAGE_KEY]))
    .update(messageId)
    .digest();
}

/** Version 3: AES-256 of each 16-byte block under the message key (ECB: each block on its own). */
function messageTags(key: Uint8Array, messageId: Buffer, blocks: Buffer): Buffer {
  const c = createCipheriv('aes-256-ecb', messageKey(key, messageId), null);
  c.setAutoPadding(false);
  return c.update(blocks);
}

/** Version 3: the block whose AES is a token's tag (kind, position, reference; zeros after). */
function writeBlock(out: Buffer, at: number, kind: number, link: number, ref: number): void {
  out.fill(0, at, at + BLOCK);
  out[at] = VERSION_MESSAGE_KEY;
  out[at + 1] = kind;
  out.writeUInt16BE(link, at + 2);
  out.writeUInt16BE(ref, at + 4);
}

/** A token's payload (message id left zero) and, version 3, its block; version 1 when a click has no ref. */
function layout(t: Omit<TrackingToken, 'messageId'>): { payload: Buffer; block: Buffer | null } {
  const kind = KINDS.indexOf(t.kind);
  if (kind < 0) throw new Error(`not a token kind: ${t.kind}`);
  const click = t.kind === 'click';
  if (click && t.ref === undefined) {
    const url = Buffer.from(t.url ?? '', 'utf8');
    const payload = Buffer.alloc(20 + url.length);
    payload[0] = VERSION;
    payload[1] = kind;
    payload.writeUInt16BE(checkU16(t.link ?? 0, 'link position'), 18);
    url.copy(payload, 20);
    return { payload, block: null };
  }
  const payload = Buffer.alloc(click ? V3_CLICK_PAYLOAD : V3_SHORT_PAYLOAD);
  payload[0] = VERSION_MESSAGE_KEY;
  payload[1] = kind;
  const link = click ? checkU16(t.link ?? 0, 'link position') : 0;
  const ref = click ? checkU16(t.ref ?? 0, 'link ref') : 0;
  if (click) {
    payload.writeUInt16BE(link, 18);
    payload.writeUInt16BE(ref, 20);
  }
  const block = Buffer.alloc(BLOCK);
  writeBlock(block, 0, kind, link, ref);
  return { payload, block };
}

/**
 * Signs tokens of one message one at a time (the html rewrite of a message composed in full): the
 * message key and its cipher are made at the first version 3 token and serve the others. Same
 * tokens as TokenSet.
 */
export function messageSigner(key: Uint8Array, messageId: string): (t: Omit<TrackingToken, 'messageId'>) => string {
  const id = uuidBytes(messageId);
  let cipher: ReturnType<typeof createCipheriv> | null = null;
  return (t) => {
    const { payload, block } = layout(t);
    id.copy(payload, 2);
    let tag: Buffer;
    if (block) {
      if (!cipher) {
        cipher = createCipheriv('aes-256-ecb', messageKey(key, id), null);
        cipher.setAutoPadding(false);
      }
      // ECB without padding: each 16-byte update is one block's AES, independent of the others.
      tag = cipher.update(block);
    } else tag = mac(key, payload);
    return Buffer.concat([payload, tag]).toString('base64url');
  };
}

interface Laid {
  /** Byte offset of the token in TokenSet's template (a multiple of 3). */
  off: number;
  payload: number;
  /** Characters of the token: base64url of payload and tag. */
  chars: number;
  /** Version 3: its block's number in the set's blocks; -1 for a version 1 token. */
  block: number;
}

/**
 * The tokens of one message, laid out once so that signing them for a message is one HMAC and one
 * AES call (version 3), plus one HMAC per URL-carrying version 1 click. A shared tracked body
 * (tracking/render-plan.ts) makes one per transmission and signs it for each of its messages.
 *
 * Each token's bytes are zero-padded to a multiple of 3 in one buffer, so one base64url pass gives
 * every token: base64 of a group of 3 bytes depends on that group only, and the first characters
 * of a zero-padded last group are those of the unpadded ending.
 */
export class TokenSet {
  private readonly laid: Laid[] = [];
  private readonly template: Buffer;
  private readonly blocks: Buffer;

  constructor(specs: readonly Omit<TrackingToken, 'messageId'>[]) {
    const cells: Buffer[] = [];
    const blocks: Buffer[] = [];
    let off = 0;
    for (const t of specs) {
      const { payload, block } = layout(t);
      const bytes = payload.length + MAC_BYTES;
      const padded = Math.ceil(bytes / 3) * 3;
      const cell = Buffer.alloc(padded);
      payload.copy(cell);
      cells.push(cell);
      this.laid.push({
        off,
        payload: payload.length,
        chars: Math.ceil((bytes * 4) / 3),
        block: block ? blocks.push(block) - 1 : -1,
      });
      off += padded;
    }
    this.template = Buffer.concat(cells, off);
    this.blocks = Buffer.concat(blocks);
  }

  /** The tokens for one message (16 bytes of its id: messageIdBytes), in the order given. */
  sign(key: Uint8Array, messageId: Buffer): string[] {
    const text = this.signText(key, messageId);
    return this.laid.map((l) => text.slice((l.off / 3) * 4, (l.off / 3) * 4 + l.chars));
  }

  /**
   * The message's tokens as one base64url text: token n starts at `starts()[n]` and is as long
   * as sign's token n (what TokenSet signs for every message of a shared body has one length).
   * The id and tags are copied a byte at a time: 16-byte Buffer.copy calls (two per token) cost
   * more in call overhead than the bytes (a few us per message of 21 tokens).
   */
  signText(key: Uint8Array, messageId: Buffer): string {
    const buf = Buffer.from(this.template);
    const tags = this.blocks.length > 0 ? messageTags(key, messageId, this.blocks) : null;
    for (const l of this.laid) {
      for (let j = 0; j < 16; j++) buf[l.off + 2 + j] = messageId[j] as number;
      if (l.block >= 0 && tags) {
        const from = l.block * BLOCK;
        const to = l.off + l.payload;
        for (let j = 0; j < BLOCK; j++) buf[to + j] = tags[from + j] as number;
      } else mac(key, buf.subarray(l.off, l.off + l.payload)).copy(buf, l.off + l.payload);
    }
    return buf.toString('base64url');
  }

  /** Where each token starts in signText's text, in the order given. */
  starts(): number[] {
    return this.laid.map((l) => (l.off / 3) * 4);
  }
}

/**
 * One token as Postyard signs it now: version 3, or version 1 for a click carrying its URL
 * (`url` without `ref`). For the tokens of one message, messageSigner or TokenSet.
 */
export function signToken(key: Uint8Array, t: TrackingToken): string {
  return messageSigner(key, t.messageId)(t);
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
  const tag = raw.subarray(raw.length - MAC_BYTES);
  if (payload[0] === VERSION_MESSAGE_KEY) return verifyV3(key, payload, tag, expect);
  if (!timingSafeEqual(mac(key, payload), tag)) return null;
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

function verifyV3(key: Uint8Array, payload: Buffer, tag: Buffer, expect: TokenKind): TrackingToken | null {
  const kind = KINDS.indexOf(expect);
  const click = expect === 'click';
  if (payload[1] !== kind || payload.length !== (click ? V3_CLICK_PAYLOAD : V3_SHORT_PAYLOAD)) return null;
  const link = click ? payload.readUInt16BE(18) : 0;
  const ref = click ? payload.readUInt16BE(20) : 0;
  const block = Buffer.alloc(BLOCK);
  writeBlock(block, 0, kind, link, ref);
  const id = payload.subarray(2, 18);
  if (!timingSafeEqual(messageTags(key, id, block), tag)) return null;
  const messageId = uuidText(id);
  return click ? { kind: 'click', messageId, link, ref } : { kind: expect, messageId };
}

/** The message id as the 16 bytes a token carries. */
export function messageIdBytes(messageId: string): Buffer {
  return uuidBytes(messageId);
}
