import { convert as htmlToText } from 'html-to-text';
import libmime from 'libmime';
import libqp from 'libqp';
import mailsplit from 'mailsplit';
import { MAX_HTML_DEPTH } from '../../lib/html-depth.ts';

/**
 * The parts of an inbound message that report reading needs, and nothing else (issue 17,
 * performance). mailparser's simpleParser builds the whole message: every header structured,
 * every part decoded, checksummed and charset-converted, text turned into HTML and back; for a
 * DSN that was most of the CPU per report (docs/benchmarks.md "Inbound DSNs"). Here mailsplit
 * (the MIME splitter mailparser itself is built on) walks the tree, and only these bodies are
 * kept and decoded: the report parts (delivery-status, feedback-report, the returned message or
 * its headers) and the readable text (text/plain, or text/html converted when there is no
 * plain text), each up to `SCAN_BYTES`. Attachments and anything else are skipped unread.
 *
 * Embedded messages (message/rfc822) are kept as their raw text, not descended into
 * (`ignoreEmbedded`): reports are read for tokens and Message-IDs in them, which the raw text
 * holds whether the part is inline or an attachment.
 */

/** Bytes kept per part and for the text (base64 grows 4/3: enough for SCAN_CHARS of text). */
export const SCAN_BYTES = 384 * 1024;
/** Most MIME parts a report may have before it is treated as unreadable. */
const MAX_PARTS = 200;

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

interface Collecting {
  type: string;
  encoding: string;
  charset: string;
  role: 'report' | 'plain' | 'html';
  chunks: Buffer[];
  bytes: number;
}

/** A body decoded from its transfer encoding and charset; never throws on bad input. */
function decodeBody(c: Collecting): string {
  const raw = Buffer.concat(c.chunks);
  let bytes: Buffer;
  if (c.encoding === 'base64') bytes = Buffer.from(raw.toString('latin1'), 'base64');
  else if (c.encoding === 'quoted-printable') bytes = libqp.decode(raw.toString('latin1'));
  else bytes = raw;
  const charset = c.charset.toLowerCase();
  if (!charset || charset === 'utf-8' || charset === 'utf8' || charset === 'us-ascii') return bytes.toString('utf8');
  try {
    return new TextDecoder(charset).decode(bytes);
  } catch {
    // An unknown charset label: Latin-1 keeps every ASCII code and word readable.
    return bytes.toString('latin1');
  }
}

function headerMap(node: MimeNode): Map<string, string> {
  const map = new Map<string, string>();
  for (const { key, line } of node.headers.getList()) {
    if (map.has(key)) continue;
    const colon = line.indexOf(':');
    // mailsplit gives header text as latin1 ('binary'); raw UTF-8 headers (RFC 6532) are read as UTF-8.
    const value = Buffer.from(colon >= 0 ? line.slice(colon + 1) : '', 'latin1').toString('utf8');
    map.set(key, value.replace(/\r?\n[ \t]+/g, ' ').trim());
  }
  return map;
}

export function walkMessage(raw: Buffer): Promise<WalkedMessage> {
  return new Promise((resolve, reject) => {
    const splitter = new mailsplit.Splitter({ ignoreEmbedded: true, maxChildNodes: MAX_PARTS });
    let root: MimeNode | null = null;
    // Bodies by the node they belong to: a multipart's epilogue arrives after its last child.
    const kept = new Map<MimeNode, Collecting>();
    const done: Collecting[] = [];
    splitter.on('data', (d: SplitterData) => {
      if (d.type === 'node') {
        if (!root) root = d;
        const type = d.contentType || (d.multipart ? '' : 'text/plain');
        const attachment = d.disposition === 'attachment';
        const role = REPORT_PARTS.has(type)
          ? 'report'
          : type === 'text/plain' && !attachment
            ? 'plain'
            : type === 'text/html' && !attachment
              ? 'html'
              : null;
        if (!role) return;
        const c: Collecting = {
          type,
          role,
          encoding: d.encoding || '',
          charset: d.charset || '',
          chunks: [],
          bytes: 0,
        };
        kept.set(d, c);
        done.push(c);
      } else if (d.type === 'body') {
        const current = kept.get(d.node);
        if (!current || current.bytes >= SCAN_BYTES) return;
        const value = d.value.subarray(0, SCAN_BYTES - current.bytes);
        current.chunks.push(value);
        current.bytes += value.length;
      }
    });
    splitter.on('error', reject);
    splitter.on('end', () => {
      // Thrown here, an error would be an uncaught exception (the listener runs on 'end', not
      // under the caller's await) and end the process: reject instead.
      try {
        resolve(finish());
      } catch (err) {
        reject(err);
      }
    });
    const finish = (): WalkedMessage => {
      const top = root as MimeNode | null;
      const headers = top ? headerMap(top) : new Map<string, string>();
      const ct = libmime.parseHeaderValue(headers.get('content-type') ?? '');
      const plain: string[] = [];
      const html: string[] = [];
      const parts: WalkedPart[] = [];
      for (const c of done) {
        const text = decodeBody(c);
        if (c.role === 'report') parts.push({ type: c.type, text });
        else (c.role === 'plain' ? plain : html).push(text);
      }
      let text = plain.join('\n');
      // maxDepth: html-to-text recurses per element, and anyone may send 20,000 nested <div>s
      // (issue 31: the stack overflowed); text deeper than that is left out.
      if (!text && html.length)
        text = htmlToText(html.join('\n').slice(0, SCAN_BYTES), {
          wordwrap: false,
          limits: { maxDepth: MAX_HTML_DEPTH },
        });
      let subject = headers.get('subject') ?? '';
      try {
        subject = libmime.decodeWords(subject);
      } catch {
        // Keep the raw subject: the heuristics read it as it is.
      }
      return {
        headers,
        contentType: (ct.value ?? '').toLowerCase().trim(),
        reportType: ct.params['report-type']?.toLowerCase().trim() ?? null,
        subject,
        text: text.slice(0, SCAN_BYTES),
        parts,
      };
    };
    splitter.end(raw);
  });
}

/** What this file reads of mailsplit's MimeNode (the package has no type declarations). */
interface MimeNode {
  type: 'node';
  contentType: string | false;
  multipart: string | false;
  disposition: string | false;
  encoding: string | false;
  charset: string | false;
  headers: { getList(): { key: string; line: string }[] };
}

type SplitterData = MimeNode | { type: 'body'; node: MimeNode; value: Buffer } | { type: 'data'; value: Buffer };
