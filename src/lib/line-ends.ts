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
  // Every CR must start a CRLF; then the LFs are all preceded by a CR exactly when there are as
  // many LFs as CRs. Two native scans, no per-byte JavaScript: about 25 ms for 25 MB.
  let crs = 0;
  for (let cr = buf.indexOf(13); cr !== -1; cr = buf.indexOf(13, cr + 2)) {
    if (buf[cr + 1] !== 10) return true;
    crs++;
  }
  let lfs = 0;
  for (let lf = buf.indexOf(10); lf !== -1; lf = buf.indexOf(10, lf + 1)) lfs++;
  return lfs !== crs;
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

const CRLF = Buffer.from('\r\n');
const EMPTY = Buffer.alloc(0);

/**
 * toCrlf for bytes that arrive in chunks (SMTP DATA): each chunk is normalised as it comes, so a
 * 25 MB message of bare LFs costs many short turns of the event loop instead of one stall of
 * several hundred milliseconds at the end. A CR that ends a chunk waits for the next one, which
 * may start with its LF.
 */
export class CrlfStream {
  private pendingCr = false;

  push(chunk: Buffer): Buffer {
    let body = chunk;
    let head = EMPTY;
    if (this.pendingCr && body.length > 0) {
      this.pendingCr = false;
      head = CRLF;
      if (body[0] === 10) body = body.subarray(1);
    }
    if (body.length > 0 && body[body.length - 1] === 13) {
      this.pendingCr = true;
      body = body.subarray(0, body.length - 1);
    }
    const normalised = toCrlf(body);
    return head.length ? Buffer.concat([head, normalised]) : normalised;
  }

  /** What is still held back: a final CR becomes CRLF. */
  end(): Buffer {
    const rest = this.pendingCr ? CRLF : EMPTY;
    this.pendingCr = false;
    return rest;
  }
}
