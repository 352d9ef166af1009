import { timingSafeEqual } from 'node:crypto';
import { hmacSha256 } from '../../lib/crypto.ts';

/**
 * Signed VERP tokens: the envelope sender of every outgoing message is
 * `bounces+<token>@<return-path domain>`, and the token carries the message id with an HMAC, so a
 * bounce can be matched to its message and nobody can forge a bounce for someone else's message
 * (docs/security.md "Inbound mail").
 *
 * Format: `u` + base32(16 bytes of the UUID) + base32(first 10 bytes of HMAC-SHA256) = 43
 * characters, so `bounces+<token>` stays under the 64-octet local-part limit (RFC 5321 4.5.3.1.1).
 * Lower-case base32 (RFC 4648 alphabet) because some MTAs change the case of local parts:
 * decoding ignores case. Ids that are not UUIDs (test fixtures) use `s` + base32(UTF-8).
 * The MAC covers the message id only; the key is derived from the master key, so tokens stay
 * valid across restarts and nodes that share POSTYARD_MASTER_KEY.
 */
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const MAC_BYTES = 10;
const MAC_CHARS = 16; // base32 of 10 bytes, no padding
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

/** Null on a character outside the alphabet or non-zero padding bits. */
export function unbase32(text: string): Buffer | null {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of text.toLowerCase()) {
    const v = ALPHABET.indexOf(ch);
    if (v < 0) return null;
    value = (value << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
    value &= (1 << bits) - 1;
  }
  if (value !== 0) return null;
  return Buffer.from(out);
}

export class VerpSigner {
  private readonly key: Buffer;

  /** `masterKey`: the 32-byte master key; the signing key is derived from it (never used as is). */
  constructor(masterKey: Buffer) {
    this.key = hmacSha256(masterKey, 'postyard:verp-token:v1');
  }

  private mac(messageId: string): Buffer {
    return hmacSha256(this.key, messageId).subarray(0, MAC_BYTES);
  }

  sign(messageId: string): string {
    const payload = UUID.test(messageId)
      ? `u${base32(Buffer.from(messageId.replaceAll('-', ''), 'hex'))}`
      : `s${base32(Buffer.from(messageId, 'utf8'))}`;
    return payload + base32(this.mac(messageId));
  }

  /** The message id a token stands for, or null when it is malformed or its MAC does not match. */
  verify(token: string): string | null {
    if (token.length <= MAC_CHARS + 1 || token.length > 200) return null;
    const kind = token[0]?.toLowerCase();
    const payload = unbase32(token.slice(1, -MAC_CHARS));
    const mac = unbase32(token.slice(-MAC_CHARS));
    if (!payload || !mac || mac.length !== MAC_BYTES) return null;
    let id: string;
    if (kind === 'u' && payload.length === 16) {
      const h = payload.toString('hex');
      id = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    } else if (kind === 's') {
      id = payload.toString('utf8');
    } else {
      return null;
    }
    return timingSafeEqual(mac, this.mac(id)) ? id : null;
  }

  /** `bounces+<token>@<domain>`: the envelope sender of a message. */
  envelopeFrom(messageId: string, returnPathDomain: string): string {
    return `bounces+${this.sign(messageId)}@${returnPathDomain}`;
  }
}

/** The token of a `bounces+<token>@...` address (any case of the prefix), else null. */
export function verpTokenOf(address: string): string | null {
  const m = /^bounces\+([a-z0-9]+)@[^@]+$/i.exec(address);
  return m?.[1] ?? null;
}
