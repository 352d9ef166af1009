import { randomBytes } from 'node:crypto';
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

  it('derives different keys from different master keys, and the same key from the same one', () => {
    const m = randomBytes(32);
    expect(deriveTokenKey(m).equals(deriveTokenKey(Buffer.from(m)))).toBe(true);
    expect(deriveTokenKey(m).equals(deriveTokenKey(randomBytes(32)))).toBe(false);
  });
});
