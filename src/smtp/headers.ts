/**
 * Byte-exact access to the header section of a submitted message. The message is stored and
 * delivered as sent (its MIME untouched, DKIM-signed on delivery), so headers are removed or
 * added by splicing byte ranges, never by re-serializing a parsed message.
 */
export interface HeaderField {
  /** Lower-cased field name. */
  name: string;
  /** Unfolded value (line breaks inside the field removed), bytes read as UTF-8. */
  value: string;
  /** Byte range of the whole field in the message, its folded lines and final line break included. */
  start: number;
  end: number;
}

export interface MessageHeaders {
  fields: HeaderField[];
  /** Offset where the header section ends (the empty separator line starts here). */
  headerEnd: number;
  /** The message's own line ending, used for fields Postyard adds. */
  eol: '\r\n' | '\n';
}

export class MalformedMessageError extends Error {}

/** Splits the header section; throws MalformedMessageError for a line that is not a field. */
export function parseHeaders(raw: Buffer): MessageHeaders {
  // Only the header section is decoded (a message can be 25 MB): it ends at the first empty
  // line. latin1 maps each byte to one char, so string offsets are byte offsets.
  const ends = [raw.indexOf('\n\r\n'), raw.indexOf('\n\n')].filter((i) => i >= 0);
  const limit = ends.length ? Math.min(...ends) + 3 : raw.length;
  const text = raw.toString('latin1', 0, Math.min(limit, raw.length));
  const fields: HeaderField[] = [];
  const eol: '\r\n' | '\n' = /\r\n/.test(text.slice(0, 4096)) || !text.includes('\n') ? '\r\n' : '\n';
  let pos = 0;
  let current: { name: string; start: number; valueStart: number } | null = null;
  const close = (end: number) => {
    if (!current) return;
    const value = Buffer.from(text.slice(current.valueStart, end), 'latin1')
      .toString('utf8')
      .replace(/\r?\n(?=[ \t])/g, '')
      .replace(/\r?\n$/, '')
      .trim();
    fields.push({ name: current.name, value, start: current.start, end });
    current = null;
  };

  while (pos < text.length) {
    const nl = text.indexOf('\n', pos);
    const lineEnd = nl === -1 ? text.length : nl + 1;
    const line = text.slice(pos, lineEnd);
    if (line === '\r\n' || line === '\n') {
      close(pos);
      return { fields, headerEnd: pos, eol };
    }
    if (line[0] === ' ' || line[0] === '\t') {
      if (!current) throw new MalformedMessageError('the message starts with a folded header line');
    } else {
      close(pos);
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon) : '';
      // RFC 5322 field-name: printable ASCII except colon; "From " mbox lines and the like fail here.
      if (!/^[!-9;-~]+$/.test(name)) {
        throw new MalformedMessageError(`malformed header line "${line.slice(0, 40).replace(/[\r\n]/g, '')}"`);
      }
      current = { name: name.toLowerCase(), start: pos, valueStart: pos + colon + 1 };
    }
    pos = lineEnd;
  }
  close(pos);
  return { fields, headerEnd: pos, eol };
}

export function findHeader(h: MessageHeaders, name: string): HeaderField | undefined {
  return h.fields.find((f) => f.name === name);
}

export function countHeader(h: MessageHeaders, name: string): number {
  return h.fields.reduce((n, f) => n + (f.name === name ? 1 : 0), 0);
}

/**
 * The message without the fields `drop` selects and with `add` (complete lines without line
 * break) appended to the header section.
 */
export function rewriteMessage(
  raw: Buffer,
  h: MessageHeaders,
  drop: (f: HeaderField) => boolean,
  add: string[] = [],
): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  for (const f of h.fields) {
    if (!drop(f)) continue;
    if (f.start > from) parts.push(raw.subarray(from, f.start));
    from = f.end;
  }
  parts.push(raw.subarray(from, h.headerEnd));
  if (add.length) {
    // A field without a final line break can only end a message that has no body.
    const lastPart = parts.findLast((p) => p.length > 0);
    if (lastPart && lastPart[lastPart.length - 1] !== 0x0a) parts.push(Buffer.from(h.eol));
    for (const line of add) parts.push(Buffer.from(line + h.eol, 'utf8'));
  }
  parts.push(raw.subarray(h.headerEnd));
  return Buffer.concat(parts);
}
