import libmime from 'libmime';

/**
 * The decoding steps of the inbound MIME walk (mime-walk.ts): header fields, structured header
 * values, transfer encodings and charsets. Inbound mail comes from anyone, so each step is a
 * single pass over its input, with no regular expression that can backtrack
 * (libqp's `/[\t ]+$/gm` took 9 s on 64 KB of spaces, mailsplit's `/[\r\n]+$/` and `/\(.*\)/`
 * grew with the square of a header's length).
 */

/** One header field: lower-case name and unfolded value (Latin-1 bytes read as UTF-8). */
export interface HeaderField {
  name: string;
  value: string;
}

/** Longest value handed to libmime's structured-value parser (Content-Type, Content-Disposition). */
const MAX_STRUCTURED = 4096;
/** Longest Content-Transfer-Encoding value read (`quoted-printable` is 16 characters). */
const MAX_ENCODING = 256;

/**
 * The fields of a header block: `lines` are its raw lines (Latin-1, line breaks included).
 * Folded lines are joined with one space; a first line `From ...` (mbox) and lines without a
 * colon are skipped, with their continuation lines.
 */
export function headerFields(lines: string[]): HeaderField[] {
  const fields: { name: string; parts: string[] }[] = [];
  let current: { name: string; parts: string[] } | null = null;
  for (const [i, raw] of lines.entries()) {
    const line = withoutLineBreak(raw);
    const first = line.charCodeAt(0);
    if (first === 0x20 || first === 0x09) {
      current?.parts.push(line.slice(leadingBlanks(line)));
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0 || (i === 0 && /^From /i.test(line))) {
      current = null;
      continue;
    }
    current = { name: line.slice(0, colon).trim().toLowerCase(), parts: [line.slice(colon + 1)] };
    fields.push(current);
  }
  return fields.map((f) => ({
    name: f.name,
    // Raw UTF-8 headers (RFC 6532) are common in reports; Latin-1 kept the bytes as they were.
    value: Buffer.from(f.parts.join(' '), 'latin1').toString('utf8').trim(),
  }));
}

function withoutLineBreak(line: string): string {
  let end = line.length;
  if (line.charCodeAt(end - 1) === 0x0a) end--;
  if (line.charCodeAt(end - 1) === 0x0d) end--;
  return end === line.length ? line : line.slice(0, end);
}

function leadingBlanks(line: string): number {
  let i = 0;
  while (line.charCodeAt(i) === 0x20 || line.charCodeAt(i) === 0x09) i++;
  return i;
}

/** `text/plain; charset="x"` -> value and lower-case parameter names (libmime, on a bounded value). */
export function structuredValue(value: string): { value: string; params: Record<string, string> } {
  const parsed = libmime.parseHeaderValue(value.slice(0, MAX_STRUCTURED));
  const params: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed.params)) if (typeof v === 'string') params[k.toLowerCase()] = v;
  return { value: (parsed.value || '').toLowerCase().trim(), params };
}

/** A Content-Transfer-Encoding value without its comments, lower case (`(x) base64` -> `base64`). */
export function transferEncoding(value: string): string {
  let out = '';
  let depth = 0;
  for (const ch of value.slice(0, MAX_ENCODING)) {
    if (ch === '(') depth++;
    else if (ch === ')') depth = Math.max(0, depth - 1);
    else if (depth === 0) out += ch;
  }
  return out.trim().toLowerCase();
}

const hexValue = (c: number | undefined): number =>
  c === undefined
    ? -1
    : c >= 0x30 && c <= 0x39
      ? c - 0x30
      : c >= 0x41 && c <= 0x46
        ? c - 0x37
        : c >= 0x61 && c <= 0x66
          ? c - 0x57
          : -1;

/**
 * Quoted-printable (RFC 2045 6.7) in one pass: `=XY` is a byte, `=` at the end of a line a soft
 * line break, whitespace at the end of a line transport padding; anything malformed is kept as
 * it is. Line breaks (CRLF or LF) are kept as they came.
 */
export function decodeQuotedPrintable(input: Buffer): Buffer {
  const out = Buffer.allocUnsafe(input.length);
  let o = 0;
  let start = 0;
  while (start < input.length) {
    const lf = input.indexOf(0x0a, start);
    const lineEnd = lf < 0 ? input.length : lf;
    let end = lineEnd;
    const crlf = lf >= 0 && end > start && input[end - 1] === 0x0d;
    if (crlf) end--;
    while (end > start && (input[end - 1] === 0x20 || input[end - 1] === 0x09)) end--;
    const soft = end > start && input[end - 1] === 0x3d;
    if (soft) end--;
    for (let i = start; i < end; i++) {
      const c = input[i] as number;
      if (c === 0x3d && i + 2 < end) {
        const hi = hexValue(input[i + 1]);
        const lo = hexValue(input[i + 2]);
        if (hi >= 0 && lo >= 0) {
          out[o++] = hi * 16 + lo;
          i += 2;
          continue;
        }
      }
      out[o++] = c;
    }
    if (lf >= 0 && !soft) {
      if (crlf) out[o++] = 0x0d;
      out[o++] = 0x0a;
    }
    start = lf < 0 ? input.length : lf + 1;
  }
  return out.subarray(0, o);
}

/** A body decoded from its transfer encoding and charset; never throws on bad input. */
export function decodeBody(raw: Buffer, encoding: string, charset: string): string {
  let bytes: Buffer;
  // Buffer's base64 decoder skips whitespace and stops at anything else: one pass, no exceptions.
  if (encoding === 'base64') bytes = Buffer.from(raw.toString('latin1'), 'base64');
  else if (encoding === 'quoted-printable') bytes = decodeQuotedPrintable(raw);
  else bytes = raw;
  const label = charset.toLowerCase();
  if (!label || label === 'utf-8' || label === 'utf8' || label === 'us-ascii') return bytes.toString('utf8');
  try {
    return new TextDecoder(label).decode(bytes);
  } catch {
    // An unknown charset label: Latin-1 keeps every ASCII code and word readable.
    return bytes.toString('latin1');
  }
}

/** A Subject with its MIME words decoded; the raw value when they cannot be. */
export function decodeSubject(value: string): string {
  try {
    return libmime.decodeWords(value);
  } catch {
    // Keep the raw subject: the heuristics read it as it is.
    return value;
  }
}
