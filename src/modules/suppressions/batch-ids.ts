import { randomFillSync } from 'node:crypto';

const HEX = Buffer.from('0123456789abcdef');
/** Byte offsets (in the 36-char text form) where each of the 16 bytes' two hex digits go. */
const POS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/**
 * `n` UUIDv7 ids (RFC 9562: 48-bit Unix ms timestamp, version 7, 74 random bits, variant 10), as
 * lib/ids.ts makes one at a time, written into one buffer and decoded once. For bulk imports:
 * the `uuid` package assembles each id from 16 concatenated pieces, about 1 KB of garbage per
 * id, which was the largest single allocation of a 1M-row import.
 */
export function newIds(n: number): string[] {
  if (n <= 0) return [];
  const ms = Date.now();
  const rnd = Buffer.allocUnsafe(n * 10);
  randomFillSync(rnd);
  const text = Buffer.allocUnsafe(n * 36);
  const b = new Uint8Array(16);
  // Timestamp bytes are the same for the whole batch (big-endian 48 bits).
  b[0] = Math.floor(ms / 2 ** 40) & 0xff;
  b[1] = Math.floor(ms / 2 ** 32) & 0xff;
  b[2] = (ms >>> 24) & 0xff;
  b[3] = (ms >>> 16) & 0xff;
  b[4] = (ms >>> 8) & 0xff;
  b[5] = ms & 0xff;
  for (let i = 0; i < n; i++) {
    const r = i * 10;
    b[6] = 0x70 | ((rnd[r] ?? 0) & 0x0f);
    b[7] = rnd[r + 1] ?? 0;
    b[8] = 0x80 | ((rnd[r + 2] ?? 0) & 0x3f);
    for (let k = 9; k < 16; k++) b[k] = rnd[r + k - 6] ?? 0;
    const o = i * 36;
    for (let k = 0; k < 16; k++) {
      const v = b[k] ?? 0;
      const p = o + (POS[k] ?? 0);
      text[p] = HEX[v >> 4] ?? 0;
      text[p + 1] = HEX[v & 0x0f] ?? 0;
    }
    text[o + 8] = 0x2d;
    text[o + 13] = 0x2d;
    text[o + 18] = 0x2d;
    text[o + 23] = 0x2d;
  }
  const all = text.toString('latin1');
  const ids = new Array<string>(n);
  for (let i = 0; i < n; i++) ids[i] = all.slice(i * 36, i * 36 + 36);
  return ids;
}
