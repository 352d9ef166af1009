import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerpSigner, verpTokenOf } from '../../src/modules/outcomes/verp.ts';
import { deliver, type Harness, startHarness } from './harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

describe('VERP envelope sender', () => {
  it('outgoing mail carries bounces+<signed token>: the token verifies to the message id', async () => {
    const sent = await deliver(h, h.a, 'ann@dest.test');
    const token = verpTokenOf(sent.envelopeFrom);
    expect(token, sent.envelopeFrom).not.toBeNull();
    expect(new VerpSigner(h.ctx.c.masterKey).verify(token as string)).toBe(sent.messageId);
    // Local part within RFC 5321's 64 octets.
    expect(sent.envelopeFrom.split('@')[0]?.length).toBeLessThanOrEqual(64);
  });

  it('a token cannot be forged: another key, a changed character or a swapped id fails', () => {
    const signer = new VerpSigner(Buffer.alloc(32, 1));
    const id = '0193a1b2-0000-7000-8000-000000000001';
    const token = signer.sign(id);
    expect(signer.verify(token)).toBe(id);
    expect(signer.verify(token.toUpperCase())).toBe(id); // MTAs may change the case
    expect(new VerpSigner(Buffer.alloc(32, 2)).verify(token)).toBeNull();
    const flipped = token.slice(0, 5) + (token[5] === 'a' ? 'b' : 'a') + token.slice(6);
    expect(signer.verify(flipped)).toBeNull();
    const other = signer.sign('0193a1b2-0000-7000-8000-000000000002');
    expect(signer.verify(token.slice(0, 27) + other.slice(27))).toBeNull();
    expect(signer.verify('u0193a1b2')).toBeNull();
    expect(signer.verify(id)).toBeNull();
  });
});
