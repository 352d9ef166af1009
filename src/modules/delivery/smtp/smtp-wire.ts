/**
 * The wire level of the outbound SMTP client: reading replies off a socket and framing the DATA
 * payload. Kept apart from smtp-session.ts (the dialogue) so each is small and testable.
 *
 * Hostile or broken servers are expected: a reply line longer than 4 KiB or a multi-line reply of
 * more than 200 lines ends the session (memory stays bounded), and anything that is not
 * `NNN[ -]text` is a protocol error, never a guess.
 */
import { isAscii } from 'node:buffer';
import { StringDecoder } from 'node:string_decoder';
import { hasBareLineEnd } from '../../../lib/line-ends.ts';

export interface Reply {
  code: number;
  /** Every line of the reply as received, without CRLF ("250-PIPELINING", "250 SIZE 1000"). */
  lines: string[];
  /** The lines joined with "\n": what results and transcripts carry as the server's response. */
  text: string;
}

const MAX_LINE = 4096;
const MAX_LINES = 200;
const REPLY_LINE = /^([2-5]\d\d)([ -]|$)/;
const ENHANCED = /^(\d{3})(?:[ -]([245]\.\d{1,3}\.\d{1,3})\b)?/;

/** Splits '550 5.1.1 No such user' into code and enhanced code (last line of a multi-line reply). */
export function parseReply(reply: string): { code?: number; enhancedCode?: string } {
  const last = reply.trim().split(/\r?\n/).pop() ?? '';
  const m = ENHANCED.exec(last);
  if (!m) return {};
  return m[2] ? { code: Number(m[1]), enhancedCode: m[2] } : { code: Number(m[1]) };
}

/** Why a read ended without a reply: the caller turns it into a failure value. */
export class WireError extends Error {
  constructor(
    message: string,
    readonly kind: 'timeout' | 'closed' | 'error' | 'protocol',
  ) {
    super(message);
  }
}

/**
 * Turns socket data into complete replies, in order. `next()` hands out the oldest unread reply
 * (replies to pipelined commands queue up here) or waits for one, with a deadline.
 */
export class ReplyReader {
  private decoder = new StringDecoder('utf8');
  private buf = '';
  private partial: string[] = [];
  private readonly ready: Reply[] = [];
  private waiter: { resolve(r: Reply): void; reject(e: WireError): void; timer: NodeJS.Timeout } | null = null;
  private failure: WireError | null = null;

  /** Feeds raw bytes from the socket. */
  push(chunk: Buffer): void {
    if (this.failure) return;
    this.buf += this.decoder.write(chunk);
    let start = 0;
    for (let nl = this.buf.indexOf('\n'); nl !== -1; nl = this.buf.indexOf('\n', start)) {
      const end = nl > start && this.buf.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      this.line(this.buf.slice(start, end));
      start = nl + 1;
      if (this.failure) return;
    }
    this.buf = start ? this.buf.slice(start) : this.buf;
    if (this.buf.length > MAX_LINE) this.fail(new WireError('reply line longer than 4096 bytes', 'protocol'));
  }

  private line(text: string): void {
    const m = REPLY_LINE.exec(text);
    if (!m || text.length > MAX_LINE) {
      this.fail(new WireError(`invalid reply from the server: ${text.slice(0, 200)}`, 'protocol'));
      return;
    }
    this.partial.push(text);
    if (m[2] === '-') {
      if (this.partial.length > MAX_LINES) this.fail(new WireError('reply of more than 200 lines', 'protocol'));
      return;
    }
    const lines = this.partial;
    this.partial = [];
    const reply = { code: Number(m[1]), lines, text: lines.join('\n') };
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      clearTimeout(w.timer);
      w.resolve(reply);
    } else this.ready.push(reply);
  }

  /** Ends every wait now and later with this error (timeout, closed connection, socket error). */
  fail(err: WireError): void {
    if (this.failure) return;
    this.failure = err;
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      clearTimeout(w.timer);
      w.reject(err);
    }
  }

  get failed(): WireError | null {
    return this.failure;
  }

  /** Data received but not yet read as replies (must be none when TLS takes over the socket). */
  get pending(): boolean {
    return this.ready.length > 0 || this.partial.length > 0 || this.buf.length > 0;
  }

  /** The next reply; rejects with a WireError after `timeoutMs` (what = "the reply to DATA", ...). */
  next(timeoutMs: number, what: string): Promise<Reply> {
    const r = this.ready.shift();
    if (r) return Promise.resolve(r);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new WireError(`timeout waiting for ${what}`, 'timeout'));
      }, timeoutMs);
      this.waiter = { resolve, reject, timer };
    });
  }
}

const END = Buffer.from('.\r\n');
const CRLF_END = Buffer.from('\r\n.\r\n');

/**
 * The DATA payload for a message: CRLF line ends only, a dot doubled at the start of every line
 * (RFC 5321 4.5.2), then the terminating dot. The usual message (CRLF already, no line starting
 * with a dot) is sent as is, without a copy.
 *
 * A bare CR or bare LF counts as a line end and leaves as CRLF, its next line dot-stuffed. The
 * renderer already normalises every message before signing it (src/lib/line-ends.ts); this is
 * the last line of defence against SMTP smuggling (`<CR>.<CR>` or `<LF>.<LF>` that a receiver
 * could take for the end of data), at the cost of a DKIM body hash that no longer matches.
 */
export function dataPayload(raw: Buffer): Buffer[] {
  if (raw.length === 0) return [END];
  if (raw[0] !== 0x2e && raw.indexOf('\n.') === -1 && !hasBareLineEnd(raw)) {
    const endsWithCrlf = raw.length >= 2 && raw[raw.length - 2] === 13 && raw[raw.length - 1] === 10;
    return [raw, endsWithCrlf ? END : CRLF_END];
  }
  const lines = raw.toString('latin1').split(/\r\n|\r|\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  const text = lines.map((line) => (line.charCodeAt(0) === 0x2e ? `.${line}` : line)).join('\r\n');
  return [Buffer.from(`${text}\r\n`, 'latin1'), END];
}

/** True when the message has bytes above 127 (it then needs BODY=8BITMIME where offered). */
export function has8bit(raw: Buffer): boolean {
  return !isAscii(raw);
}

/** An envelope address we can put on the wire: no line breaks, brackets or spaces (no injection). */
export function safeAddress(address: string): boolean {
  if (address.length > 998) return false;
  for (let i = 0; i < address.length; i++) {
    const c = address.charCodeAt(i);
    // Controls (CR, LF, NUL, ...), space, DEL, angle brackets, and Unicode spaces.
    if (c <= 32 || c === 127 || c === 60 || c === 62 || (c > 127 && /\s/.test(address[i] as string))) return false;
  }
  return true;
}

export interface Extensions {
  pipelining: boolean;
  /** SIZE advertised: null = not at all; 0 = no fixed limit. */
  size: number | null;
  starttls: boolean;
  eightBitMime: boolean;
  smtpUtf8: boolean;
  auth: string[];
}

export const NO_EXTENSIONS: Extensions = Object.freeze({
  pipelining: false,
  size: null,
  starttls: false,
  eightBitMime: false,
  smtpUtf8: false,
  auth: [],
});

/** The extensions a 250 reply to EHLO advertises (its first line is the greeting). */
export function parseEhlo(lines: string[]): Extensions {
  const ext: Extensions = { ...NO_EXTENSIONS, auth: [] };
  for (const line of lines.slice(1)) {
    const [kw = '', ...args] = line
      .slice(4)
      .trim()
      .toUpperCase()
      .split(/[\s=]+/);
    if (kw === 'PIPELINING') ext.pipelining = true;
    else if (kw === 'SIZE') ext.size = Number(args[0]) || 0;
    else if (kw === 'STARTTLS') ext.starttls = true;
    else if (kw === '8BITMIME') ext.eightBitMime = true;
    else if (kw === 'SMTPUTF8') ext.smtpUtf8 = true;
    else if (kw === 'AUTH') ext.auth = args;
  }
  return ext;
}

/**
 * MAIL (with SIZE, BODY=8BITMIME and SMTPUTF8 where they apply), one RCPT per recipient, DATA;
 * or why the message cannot be offered to this server at all (refused here, nothing sent).
 */
export function envelopeCommands(
  message: { envelopeFrom: string; recipients: string[]; raw: Buffer },
  ext: Extensions,
): { ok: true; commands: string[] } | { ok: false; why: string } {
  const { envelopeFrom, recipients, raw } = message;
  if (recipients.length === 0 || !safeAddress(envelopeFrom) || !recipients.every(safeAddress)) {
    return { ok: false, why: 'envelope address that cannot be sent (line break, space or angle bracket)' };
  }
  if (ext.size && raw.length > ext.size) {
    return { ok: false, why: `message of ${raw.length} bytes is over the server's SIZE limit of ${ext.size}` };
  }
  const utf8 = !isAsciiText(envelopeFrom) || !recipients.every(isAsciiText);
  if (utf8 && !ext.smtpUtf8) return { ok: false, why: 'non-ASCII address and the server does not offer SMTPUTF8' };
  let mail = `MAIL FROM:<${envelopeFrom}>`;
  if (ext.size !== null) mail += ` SIZE=${raw.length}`;
  if (ext.eightBitMime && has8bit(raw)) mail += ' BODY=8BITMIME';
  if (utf8) mail += ' SMTPUTF8';
  return { ok: true, commands: [mail, ...recipients.map((r) => `RCPT TO:<${r}>`), 'DATA'] };
}

function isAsciiText(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 127) return false;
  return true;
}
