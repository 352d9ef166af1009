import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { deriveTokenKey, signToken, verifyToken } from './token.ts';

const key = deriveTokenKey(randomBytes(32));
const id = '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';

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

  it('version 2 click tokens: 51 characters whatever the URL, position and link number round-trip', () => {
    const t = signToken(key, { kind: 'click', messageId: id, link: 513, ref: 65535 });
    expect(t.length).toBe(51);
    expect(Buffer.from(t, 'base64url')[0]).toBe(2);
    expect(verifyToken(key, t, 'click')).toEqual({ kind: 'click', messageId: id, link: 513, ref: 65535 });
    expect(verifyToken(key, t, 'open')).toBeNull();
    expect(() => signToken(key, { kind: 'click', messageId: id, link: 0, ref: 65536 })).toThrow();
    // Without a link number the token is version 1 and carries the URL, as before.
    const v1 = signToken(key, { kind: 'click', messageId: id, link: 1, url: 'https://a.example/' });
    expect(Buffer.from(v1, 'base64url')[0]).toBe(1);
  });

  it('refuses a tampered version 2 token, and version 2 payloads of another kind or length even when signed', () => {
    const t = signToken(key, { kind: 'click', messageId: id, link: 0, ref: 3 });
    const raw = Buffer.from(t, 'base64url');
    for (let i = 0; i < raw.length; i++) {
      const bad = Buffer.from(raw);
      bad[i] = (bad[i] ?? 0) ^ 0x40;
      expect(verifyToken(key, bad.toString('base64url'), 'click')).toBeNull();
    }
    const sign = (payload: Buffer) =>
      Buffer.concat([payload, createHmac('sha256', key).update(payload).digest().subarray(0, 16)]).toString(
        'base64url',
      );
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
});
