/**
 * CRLF line ends for bytes that leave over SMTP.
 *
 * RFC 5321 and 5322 allow CR and LF in a message only as the pair CRLF. Receivers disagree on
 * what a bare CR or a bare LF means: some end a line there, some do not. That disagreement is
 * SMTP smuggling: `<LF>.<LF>` or `<CR>.<CR>` passes one hop as content and ends the data at the
 * next, so what follows is read there as a second message from us. Every message Postyard sends
 * is therefore made of CRLF lines only, before it is DKIM-signed (so the signature covers the
 * bytes that leave), and the DATA writer (smtp-wire.ts) checks again.
 */

/** True when `raw` holds a CR not followed by LF, or an LF not preceded by CR. */
export function hasBareLineEnd(raw: Uint8Array): boolean {
  const buf = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  for (let cr = buf.indexOf(13); cr !== -1; cr = buf.indexOf(13, cr + 1)) {
    if (buf[cr + 1] !== 10) return true;
  }
  for (let lf = buf.indexOf(10); lf !== -1; lf = buf.indexOf(10, lf + 1)) {
    if (lf === 0 || buf[lf - 1] !== 13) return true;
  }
  return false;
}

/** Every bare CR and bare LF turned into CRLF; `raw` itself when it has none (the usual case). */
export function toCrlf(raw: Buffer): Buffer {
  if (!hasBareLineEnd(raw)) return raw;
  return Buffer.from(raw.toString('latin1').replace(/\r\n|\r|\n/g, '\r\n'), 'latin1');
}

/** The same for text that is about to be encoded into a message part. */
export function textToCrlf(text: string): string {
  return /\r(?!\n)|(?<!\r)\n/.test(text) ? text.replace(/\r\n|\r|\n/g, '\r\n') : text;
}
