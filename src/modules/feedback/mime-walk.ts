import { htmlNoticeText } from './html-text.ts';
import { decodeBody, decodeSubject, headerFields, structuredValue, transferEncoding } from './mime-decode.ts';

/**
 * The parts of an inbound message that report reading needs, and nothing else. Kept and
 * decoded: the report parts (delivery-status, feedback-report, the returned message or its
 * headers) and the readable text (text/plain, or text/html as text when there is no plain text),
 * each up to `SCAN_BYTES`. Attachments and anything else are skipped unread
 * (mailparser, used before, decoded everything).
 *
 * The walk is one pass over the lines of the message, linear in its size whatever it holds
 * (inbound mail comes from anyone, unauthenticated). mailsplit, used before,
 * ran regular expressions that grew with the square of a header's length and could not be
 * given a bound; here a boundary line is found with one map lookup whatever the nesting, a
 * part's header block is read up to `MAX_HEADER_BYTES` (the rest of the block is skipped), and
 * at most `MAX_PARTS` parts are walked. Embedded messages (message/rfc822) are kept as their raw
 * text, not descended into: reports are read for tokens and Message-IDs in them, which the raw
 * text holds whether the part is inline or an attachment.
 */

/** Bytes kept per part and for the text (base64 grows 4/3: enough for SCAN_CHARS of text). */
export const SCAN_BYTES = 384 * 1024;
/** Most MIME parts (the message itself included) a report may have before it is refused as unreadable. */
export const MAX_PARTS = 200;
/** Bytes of one part's header block that are read; lines past them are skipped. */
export const MAX_HEADER_BYTES = 64 * 1024;
/** Longest boundary honoured (RFC 2046 5.1.1 allows 70); a multipart with a longer one is not read. */
const MAX_BOUNDARY = 256;
const NEXT_DASH_LINE = Buffer.from('\n--', 'latin1');

const REPORT_PARTS = new Set([
  'message/delivery-status',
  'message/global-delivery-status',
  'message/feedback-report',
  'message/rfc822',
  'message/global',
  'text/rfc822-headers',
  'message/rfc822-headers',
  'message/global-headers',
]);

export interface WalkedPart {
  /** Lower-case content type. */
  type: string;
  text: string;
}

export interface WalkedMessage {
  /** Top-level header fields: lower-case name -> first value, unfolded, MIME words not decoded. */
  headers: Map<string, string>;
  /** Top-level content type, lower case ('' when absent). */
  contentType: string;
  /** Its `report-type` parameter, lower case (null when absent). */
  reportType: string | null;
  /** Subject with MIME words decoded. */
  subject: string;
  /** The readable text: text/plain parts that are not attachments (else text/html as text). */
  text: string;
  /** Report parts in message order, decoded. */
  parts: WalkedPart[];
}

/** A part being walked: its header lines until the blank line, then where its body lies. */
interface Part {
  headerLines: string[];
  headerBytes: number;
  /** Set when the header block has been read. */
  kept: Kept | null;
  bodyStart: number;
}

/** A body that will be decoded. */
interface Kept {
  type: string;
  role: 'report' | 'plain' | 'html';
  encoding: string;
  charset: string;
  start: number;
  end: number;
}

/** An open multipart: its boundary and the open multipart with the same boundary it hides, if any. */
interface Container {
  boundary: string;
  hides: number | undefined;
}

/** What a part's header block says: its headers, and what to do with its body. */
function readHeader(lines: string[], root: boolean) {
  const headers = new Map<string, string>();
  for (const f of headerFields(lines)) if (!headers.has(f.name)) headers.set(f.name, f.value);
  const ct = structuredValue(headers.get('content-type') ?? '');
  const disposition = structuredValue(headers.get('content-disposition') ?? '');
  const attachment = disposition.value === 'attachment';
  // No Content-Type is text/plain, unless it names a file (then it is an attachment to skip).
  const type = ct.value || (disposition.params.filename || attachment ? 'application/octet-stream' : 'text/plain');
  const boundary = type.startsWith('multipart/') ? ct.params.boundary : undefined;
  const role = REPORT_PARTS.has(type)
    ? 'report'
    : type === 'text/plain' && !attachment
      ? 'plain'
      : type === 'text/html' && !attachment
        ? 'html'
        : null;
  return {
    headers: root ? headers : null,
    contentType: ct.value,
    reportType: ct.params['report-type']?.toLowerCase().trim() ?? null,
    type,
    boundary: boundary && boundary.length <= MAX_BOUNDARY ? boundary : undefined,
    role,
    encoding: transferEncoding(headers.get('content-transfer-encoding') ?? ''),
    charset: ct.params.charset ?? '',
  } as const;
}

/**
 * The boundary a line is, if any: `--<boundary>` (a next part) or `--<boundary>--` (the end),
 * optionally followed by blanks (RFC 2046 5.1.1 transport padding), looked up among the open ones.
 */
function boundaryOf(
  raw: Buffer,
  start: number,
  end: number,
  open: Map<string, number>,
): { index: number; last: boolean } | null {
  if (raw[start] !== 0x2d || raw[start + 1] !== 0x2d) return null;
  let stop = end;
  while (
    stop > start + 2 &&
    (raw[stop - 1] === 0x0a || raw[stop - 1] === 0x0d || raw[stop - 1] === 0x20 || raw[stop - 1] === 0x09)
  )
    stop--;
  if (stop - start - 2 > MAX_BOUNDARY + 2) return null;
  const line = raw.toString('latin1', start + 2, stop);
  const next = open.get(line);
  if (next !== undefined) return { index: next, last: false };
  if (!line.endsWith('--')) return null;
  const last = open.get(line.slice(0, -2));
  return last === undefined ? null : { index: last, last: true };
}

/** The body of a part that ends where a boundary line starts: without the line break before it. */
function bodyEnd(raw: Buffer, bodyStart: number, boundaryLine: number): number {
  let end = boundaryLine;
  if (end > bodyStart && raw[end - 1] === 0x0a) end--;
  if (end > bodyStart && raw[end - 1] === 0x0d) end--;
  return end;
}

export async function walkMessage(raw: Buffer): Promise<WalkedMessage> {
  const kept: Kept[] = [];
  const containers: Container[] = [];
  /** Open boundaries -> index in `containers` (the innermost one when a boundary repeats). */
  const open = new Map<string, number>();
  let top: ReturnType<typeof readHeader> | null = null;
  let parts = 1;
  let part: Part | null = { headerLines: [], headerBytes: 0, kept: null, bodyStart: -1 };

  const endHeader = (p: Part, bodyStart: number) => {
    const h = readHeader(p.headerLines, top === null);
    top ??= h;
    p.headerLines = [];
    if (h.boundary !== undefined) {
      containers.push({ boundary: h.boundary, hides: open.get(h.boundary) });
      open.set(h.boundary, containers.length - 1);
      return null; // the preamble that follows is not read
    }
    p.bodyStart = bodyStart;
    if (h.role)
      p.kept = { type: h.type, role: h.role, encoding: h.encoding, charset: h.charset, start: bodyStart, end: -1 };
    return p;
  };
  const closeTo = (index: number) => {
    while (containers.length > index) {
      const c = containers.pop() as Container;
      if (c.hides === undefined) open.delete(c.boundary);
      else open.set(c.boundary, c.hides);
    }
  };
  const endPart = (p: Part, end: number) => {
    if (p.bodyStart < 0) {
      // A part without a blank line after its header: its header still counts, its body is empty.
      endHeader(p, end);
    }
    if (p.kept) {
      p.kept.end = end;
      kept.push(p.kept);
    }
  };

  let pos = 0;
  while (pos < raw.length) {
    if (!part || part.bodyStart >= 0) {
      // In a body only a boundary line matters: go straight to the next line starting with "--".
      if (open.size === 0) break;
      if (raw[pos] !== 0x2d || raw[pos + 1] !== 0x2d) {
        const dashes = raw.indexOf(NEXT_DASH_LINE, pos);
        if (dashes < 0) break;
        pos = dashes + 1;
      }
    }
    const lf = raw.indexOf(0x0a, pos);
    const next = lf < 0 ? raw.length : lf + 1;
    const hit = open.size > 0 ? boundaryOf(raw, pos, next, open) : null;
    if (hit) {
      if (part) endPart(part, part.bodyStart >= 0 ? bodyEnd(raw, part.bodyStart, pos) : pos);
      if (hit.last) {
        closeTo(hit.index);
        part = null; // the epilogue that follows is not read
      } else {
        closeTo(hit.index + 1);
        if (++parts > MAX_PARTS) throw new Error(`more than ${MAX_PARTS} MIME parts`);
        part = { headerLines: [], headerBytes: 0, kept: null, bodyStart: -1 };
      }
    } else if (part && part.bodyStart < 0) {
      const blank = next - pos === 1 || (next - pos === 2 && raw[pos] === 0x0d);
      if (blank && lf >= 0) {
        part = endHeader(part, next);
      } else if (part.headerBytes < MAX_HEADER_BYTES) {
        const take = Math.min(next, pos + MAX_HEADER_BYTES - part.headerBytes);
        part.headerLines.push(raw.toString('latin1', pos, take));
        part.headerBytes += take - pos;
      }
    }
    pos = next;
  }
  if (part) endPart(part, raw.length);

  const plain: string[] = [];
  const html: string[] = [];
  const reportParts: WalkedPart[] = [];
  for (const k of kept) {
    const text = decodeBody(raw.subarray(k.start, Math.min(k.end, k.start + SCAN_BYTES)), k.encoding, k.charset);
    if (k.role === 'report') reportParts.push({ type: k.type, text });
    else (k.role === 'plain' ? plain : html).push(text);
  }
  let text = plain.join('\n');
  if (!text && html.length) text = htmlNoticeText(html.join('\n').slice(0, SCAN_BYTES));
  const head = top as ReturnType<typeof readHeader> | null;
  const headers = head?.headers ?? new Map<string, string>();
  return {
    headers,
    contentType: head?.contentType ?? '',
    reportType: head?.reportType ?? null,
    subject: decodeSubject(headers.get('subject') ?? ''),
    text: text.slice(0, SCAN_BYTES),
    parts: reportParts,
  };
}
