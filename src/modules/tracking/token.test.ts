import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { deriveTokenKey, messageIdBytes, messageSigner, signToken, TokenSet, verifyToken } from './token.ts';

const key = deriveTokenKey(randomBytes(32));
const id = '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';

/** `payload` with a version 1/2 MAC: the first 16 bytes of HMAC-SHA256 under the token key. */
function hmacSigned(payload: Buffer): string {
  return Buffer.concat([payload, createHmac('sha256', key).update(payload).digest().subarray(0, 16)]).toString(
    'base64url',
  );
}

/** A version 2 click token as mail sent before version 3 carries it. */
function v2(messageId: string, link: number, ref: number): string {
  return hmacSigned(
    Buffer.concat([
      Buffer.from([2, 1]),
      messageIdBytes(messageId),
      Buffer.from([link >> 8, link & 255, ref >> 8, ref & 255]),
    ]),
  );
}

/** Version 3 as docs/tracking.md defines it, written out independently of token.ts. */
function v3(messageId: string, kind: number, link?: number, ref?: number): string {
  const mid = messageIdBytes(messageId);
  const messageKey = createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from([3]), mid]))
    .digest();
  const block = Buffer.alloc(16);
  block.set([3, kind, (link ?? 0) >> 8, (link ?? 0) & 255, (ref ?? 0) >> 8, (ref ?? 0) & 255]);
  const c = createCipheriv('aes-256-ecb', messageKey, null);
  c.setAutoPadding(false);
  const tag = c.update(block);
  const tail = link === undefined ? [] : [Buffer.from([link >> 8, link & 255, (ref ?? 0) >> 8, (ref ?? 0) & 255])];
  return Buffer.concat([Buffer.from([3, kind]), mid, ...tail, tag]).toString('base64url');
}

describe('tracking tokens', () => {
  it('round-trips open, unsubscribe and click tokens (click with link index and URL)', () => {
    expect(verifyToken(key, signToken(key, { kind: 'open', messageId: id }), 'open')).toEqual({
      kind: 'open',
      messageId: id,
    });
    expect(verifyToken(key, signToken(key, { kind: 'unsubscribe', messageId: id }), 'unsubscribe')).toEqual({
      kind: 'unsubscribe',
      messageId: id,
    });
    const url = 'https://shop.example/ü?a=1&b=2#x';
    const t = signToken(key, { kind: 'click', messageId: id, link: 7, url });
    expect(t).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(verifyToken(key, t, 'click')).toEqual({ kind: 'click', messageId: id, link: 7, url });
  });

  it('refuses a token of another kind, a tampered byte, a truncation, another key and junk', () => {
    const open = signToken(key, { kind: 'open', messageId: id });
    expect(verifyToken(key, open, 'click')).toBeNull();
    expect(verifyToken(key, open, 'unsubscribe')).toBeNull();
    const click = signToken(key, { kind: 'click', messageId: id, link: 0, url: 'https://a.example/' });
    const raw = Buffer.from(click, 'base64url');
    for (const i of [0, 1, 5, 19, raw.length - 20, raw.length - 1]) {
      const bad = Buffer.from(raw);
      bad[i] = (bad[i] ?? 0) ^ 1;
      expect(verifyToken(key, bad.toString('base64url'), 'click')).toBeNull();
    }
    expect(verifyToken(key, click.slice(0, -2), 'click')).toBeNull();
    expect(verifyToken(deriveTokenKey(randomBytes(32)), click, 'click')).toBeNull();
    expect(verifyToken(key, 'not a token', 'click')).toBeNull();
    expect(verifyToken(key, 'A'.repeat(7000), 'click')).toBeNull();
  });

  it('version 2 click tokens (mail sent before version 3): built byte by byte, still verify; 51 characters', () => {
    const t = v2(id, 513, 65535);
    expect(t.length).toBe(51);
    expect(verifyToken(key, t, 'click')).toEqual({ kind: 'click', messageId: id, link: 513, ref: 65535 });
    expect(verifyToken(key, t, 'open')).toBeNull();
    expect(() => signToken(key, { kind: 'click', messageId: id, link: 0, ref: 65536 })).toThrow();
    // Without a link number the token is version 1 and carries the URL, as before.
    const v1 = signToken(key, { kind: 'click', messageId: id, link: 1, url: 'https://a.example/' });
    expect(Buffer.from(v1, 'base64url')[0]).toBe(1);
  });

  it('version 1 open and unsubscribe tokens (mail sent before version 3), built byte by byte, still verify', () => {
    for (const [kind, n] of [
      ['open', 0],
      ['unsubscribe', 2],
    ] as const) {
      const t = hmacSigned(Buffer.concat([Buffer.from([1, n]), messageIdBytes(id)]));
      expect(t.length).toBe(46);
      expect(verifyToken(key, t, kind)).toEqual({ kind, messageId: id });
    }
  });

  it('refuses a tampered version 2 token, and version 2 payloads of another kind or length even when signed', () => {
    const t = v2(id, 0, 3);
    const raw = Buffer.from(t, 'base64url');
    for (let i = 0; i < raw.length; i++) {
      const bad = Buffer.from(raw);
      bad[i] = (bad[i] ?? 0) ^ 0x40;
      expect(verifyToken(key, bad.toString('base64url'), 'click')).toBeNull();
    }
    const sign = hmacSigned;
    const payload = raw.subarray(0, raw.length - 16);
    const asOpen = Buffer.from(payload);
    asOpen[1] = 0;
    expect(verifyToken(key, sign(asOpen), 'open')).toBeNull();
    expect(verifyToken(key, sign(Buffer.concat([payload, Buffer.from([0])])), 'click')).toBeNull();
    expect(verifyToken(key, sign(payload.subarray(0, 21)), 'click')).toBeNull();
    const v3 = Buffer.from(payload);
    v3[0] = 3;
    expect(verifyToken(key, sign(v3), 'click')).toBeNull();
  });

  it('derives different keys from different master keys, and the same key from the same one', () => {
    const m = randomBytes(32);
    expect(deriveTokenKey(m).equals(deriveTokenKey(Buffer.from(m)))).toBe(true);
    expect(deriveTokenKey(m).equals(deriveTokenKey(randomBytes(32)))).toBe(false);
  });

  it('version 3: what signToken makes now, exactly as documented (one HMAC per message, an AES block per token)', () => {
    expect(signToken(key, { kind: 'open', messageId: id })).toBe(v3(id, 0));
    expect(signToken(key, { kind: 'unsubscribe', messageId: id })).toBe(v3(id, 2));
    const click = signToken(key, { kind: 'click', messageId: id, link: 513, ref: 65535 });
    expect(click).toBe(v3(id, 1, 513, 65535));
    expect([v3(id, 0).length, click.length]).toEqual([46, 51]);
    expect(verifyToken(key, click, 'click')).toEqual({ kind: 'click', messageId: id, link: 513, ref: 65535 });
    expect(verifyToken(key, v3(id, 0), 'open')).toEqual({ kind: 'open', messageId: id });
    expect(verifyToken(key, v3(id, 2), 'unsubscribe')).toEqual({ kind: 'unsubscribe', messageId: id });
  });

  it('version 3 tags are per message and per link: a tag moved to another link, kind or message, any flipped bit, or an HMAC tag is refused', () => {
    const other = '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c';
    const t = Buffer.from(signToken(key, { kind: 'click', messageId: id, link: 2, ref: 7 }), 'base64url');
    const tagOf = (x: Buffer) => x.subarray(22);
    const withTag = (token: string, tag: Buffer) => {
      const b = Buffer.from(token, 'base64url');
      tag.copy(b, b.length - 16);
      return b.toString('base64url');
    };
    const refused = [
      withTag(v3(id, 1, 2, 8), tagOf(t)), // another link number, same message
      withTag(v3(id, 1, 3, 7), tagOf(t)), // another position
      withTag(v3(other, 1, 2, 7), tagOf(t)), // another message
      hmacSigned(t.subarray(0, 22)), // the payload with a version 1/2 MAC
    ];
    for (const r of refused) expect(verifyToken(key, r, 'click')).toBeNull();
    for (let i = 0; i < t.length; i++) {
      for (const bit of [0x01, 0x80]) {
        const bad = Buffer.from(t);
        bad[i] = (bad[i] ?? 0) ^ bit;
        expect(verifyToken(key, bad.toString('base64url'), 'click')).toBeNull();
      }
    }
    const open = signToken(key, { kind: 'open', messageId: id });
    expect(verifyToken(key, open, 'unsubscribe')).toBeNull();
    expect(verifyToken(key, withTag(v3(id, 2), tagOf(Buffer.from(open, 'base64url'))), 'unsubscribe')).toBeNull();
    expect(verifyToken(deriveTokenKey(randomBytes(32)), open, 'open')).toBeNull();
    // A version 3 click payload cut to the open length, or one byte longer, with a tag for it.
    expect(verifyToken(key, v3(id, 1), 'click')).toBeNull();
    expect(verifyToken(key, `${v3(id, 1, 2, 7)}A`, 'click')).toBeNull();
  });

  it('TokenSet and messageSigner give the tokens signToken gives, version 1 URL clicks of any length among them', () => {
    const specs = [
      { kind: 'click' as const, link: 0, ref: 0 },
      { kind: 'click' as const, link: 1, url: 'https://a.example/x' },
      { kind: 'click' as const, link: 2, url: 'https://a.example/xy' },
      { kind: 'click' as const, link: 3, url: 'https://a.example/xyz' },
      { kind: 'click' as const, link: 4, ref: 9 },
      { kind: 'open' as const },
      { kind: 'unsubscribe' as const },
    ];
    const set = new TokenSet(specs);
    for (const messageId of [id, '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c']) {
      const expected = specs.map((s) => signToken(key, { ...s, messageId }));
      expect(set.sign(key, messageIdBytes(messageId))).toEqual(expected);
      const sign = messageSigner(key, messageId);
      expect(specs.map((s) => sign(s))).toEqual(expected);
      const kinds = ['click', 'click', 'click', 'click', 'click', 'open', 'unsubscribe'] as const;
      for (const [i, tok] of expected.entries())
        expect(verifyToken(key, tok, kinds[i] as 'click')?.messageId).toBe(messageId);
    }
  });
});
