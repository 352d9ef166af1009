import { describe, expect, it } from 'vitest';
import { CrlfStream, hasBareLineEnd, toCrlf } from './line-ends.ts';

const b = (s: string) => Buffer.from(s, 'latin1');

describe('line ends', () => {
  it('finds bare CR and bare LF anywhere, and nothing in CRLF-only text', () => {
    for (const clean of ['', 'a', 'a\r\nb\r\n', '\r\n\r\n']) expect(hasBareLineEnd(b(clean)), clean).toBe(false);
    for (const bare of ['\n', '\r', 'a\rb\r\n', 'a\r\nb\n', '\r\r\n', '\r\n\n', 'x\r']) {
      expect(hasBareLineEnd(b(bare)), JSON.stringify(bare)).toBe(true);
    }
    expect(toCrlf(b('a\r.\rb\n.\nc\r\r\nd'))).toEqual(b('a\r\n.\r\nb\r\n.\r\nc\r\n\r\nd'));
  });

  it('CrlfStream gives what toCrlf gives on the whole, however the bytes are cut', () => {
    const text = b('H: 1\r\n\r\none\r.\rtwo\n.\nthree\r\r\n\n\r\nfour\r');
    const whole = toCrlf(text);
    for (let size = 1; size <= text.length; size++) {
      const s = new CrlfStream();
      const out: Buffer[] = [];
      for (let i = 0; i < text.length; i += size) out.push(s.push(text.subarray(i, i + size)));
      out.push(s.end());
      expect(Buffer.concat(out).toString('latin1'), `chunks of ${size}`).toBe(whole.toString('latin1'));
    }
  });
});
