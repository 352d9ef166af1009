/**
 * Shared bodies: the message of a transmission is composed once and its body reused for every
 * recipient whose message differs only in To, Message-ID and Date. (Not stored templates: this is
 * a render-time cache of one transmission's composed body.)
 *
 * Why: composing (MailComposer: multipart tree, transfer encodings, folding) cost about a third
 * of a render on the bench message, and a transmission to 10,000 recipients composed the same
 * body 10,000 times; with attachments, base64-encoding them each time. Here the body bytes and
 * their DKIM body hash are computed once per transmission (per render thread); each message gets
 * its own header block and its own signature over it.
 *
 * When it applies (else the caller composes the message in full, as before):
 * - the recipient has no `substitution_data` of its own, or the content uses no template
 *   language at all (renderer.ts decides; the body is rendered once with the transmission's data);
 * - the recipient's To field is one MailComposer writes verbatim: an ASCII address, and no name
 *   or a plain name of letters, digits and single spaces, within 76 characters (no encoding,
 *   quoting or folding to reproduce). Tests compare the result with a full composition.
 *
 * Tracked mail (open pixel, click links, List-Unsubscribe) differs per message only in its
 * tokens, whose length does not depend on the message (tracking/render-plan.ts). The body is then
 * composed once with placeholder tokens (`markers`), where each character of each marker lands is
 * recorded (quoted-printable may break a line inside one: `=\r\n` is stepped over), and each
 * message gets a copy with its own tokens written over them and its own body hash. When a marker
 * is not found as often as it was put in (a base64-encoded part), there is no shared body.
 */
import { createHash, type Hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { dkimBodyHash, relaxedBody } from './dkim.ts';
import { type BuildMessageInput, buildMessage } from './mime.ts';
import { RenderError } from '../../content/template-language.ts';

export interface SharedBodyParts {
  /** The header block of this message (no final CRLF), latin1 text. */
  head: string;
  /**
   * The body bytes: the transmission's shared body, or for tracked mail a copy with this
   * message's tokens written in, made when first read (messageBytes writes them straight into the
   * message instead).
   */
  readonly body: Buffer;
  /** DKIM bh= of `body`. */
  bodyHash: string;
  /** Tracked mail: writes `body` into `out` at `at` (bodyLength bytes). */
  writeBody?: (out: Buffer, at: number) => void;
  bodyLength: number;
}

/**
 * The message: `head` (its header block with the signature and the blank line), then its body,
 * in one allocation. For tracked mail that is one copy of the shared body with the tokens written
 * over it, not a patched copy copied again into the message.
 */
export function messageBytes(parts: SharedBodyParts, head: Buffer): Buffer {
  if (!parts.writeBody) return Buffer.concat([head, parts.body]);
  const out = Buffer.allocUnsafe(head.length + parts.bodyLength);
  head.copy(out, 0);
  parts.writeBody(out, head.length);
  return out;
}

interface SharedBody {
  lines: string[];
  toAt: number;
  idAt: number;
  dateAt: number;
  body: Buffer;
  bodyHash: string;
  slots: Slot[];
  /** The slots' markers in slot order: what `fill` is asked for (one array per shared body). */
  markers: string[];
  /** Per slot, where its characters go in `body` and in `relaxed.rest`, as runs (toRuns). */
  runs: { body: number[]; relaxed: number[] }[];
  /**
   * With slots: the body in DKIM relaxed canonical form (latin1) from the first marker on, where
   * the markers are found again (relaxing only touches whitespace and line ends, which no marker
   * holds), so each message's body hash is the SHA-256 state of the bytes before the first marker
   * (computed once) continued over the rest with this message's tokens written in, instead of
   * canonicalizing again. `rest` is this body's own buffer, patched in place for each message (its
   * other bytes never change, and every marker is overwritten before it is hashed, synchronously):
   * no copy per message.
   */
  relaxed: { prefix: Hash; rest: Buffer } | null;
}

/** Where one marker was written: header lines (never folded inside a token) and body bytes. */
interface Slot {
  marker: string;
  head: { line: number; col: number }[];
  /** Per occurrence in the body, the byte offset of each of the marker's characters. */
  body: number[][];
  /** The same in the relaxed body's rest (SharedBody.relaxed, offsets from its start). */
  relaxed: number[][];
}

const PLACEHOLDER_TO = 'recipient@placeholder.invalid';
const PLACEHOLDER_ID = 'message@placeholder.invalid';
/**
 * How many shared bodies a render thread keeps, and their bytes at most (body, relaxed copy, header
 * lines), least recently used dropped first. A count alone (it was 64, oldest first) did not
 * survive fair claims: a claim takes a few messages from each of 32 tenants in turn,
 * so with 1,000 tenants sending one transmission each, a transmission came back after ~1,000
 * others and was composed again every time: a third of every render, 620 msgs/s against 970 with
 * the bodies kept (docs/benchmarks.md "Session 14"). Bytes bound the memory instead: 64 bodies
 * with 25 MB attachments were 1.6 GB per thread. A body larger than the budget is not kept.
 */
const MAX_SHARED_BODIES = 4096;
export const SHARED_BODY_BYTES = 64 * 1024 * 1024;
const PLAIN_NAME = /^[A-Za-z0-9]+(?: [A-Za-z0-9]+)*$/;
const ASCII_ADDRESS = /^[\x21-\x7e]+@[\x21-\x7e]+$/;

/**
 * A composed shared body; `body: null` = this transmission cannot use one. `renderError`: its
 * content failed to render (the same data renders the same way, so every message that would share
 * the body fails with it without rendering again: a template that runs out of its time budget
 * costs the thread that budget once per transmission, not once per message).
 */
interface Kept {
  body: SharedBody | null;
  renderError?: RenderError;
}

function keptBytes(k: Kept): number {
  const t = k.body;
  if (!t) return 64;
  let n = t.body.length + (t.relaxed?.rest.length ?? 0) + 256;
  for (const l of t.lines) n += l.length;
  return n;
}

function newCache(maxSize: number): LRUCache<string, Kept> {
  return new LRUCache<string, Kept>({ max: MAX_SHARED_BODIES, maxSize, sizeCalculation: keptBytes });
}

/** Shared bodies by transmission id, composed. */
let sharedBodies = newCache(SHARED_BODY_BYTES);
/** Shared bodies being composed: the messages that arrive meanwhile wait for the same one. */
const composing = new Map<string, Promise<Kept>>();

/** The To value MailComposer would write, when it writes it verbatim; else null. */
function plainTo(email: string, name: string | null | undefined): string | null {
  if (!ASCII_ADDRESS.test(email) || /[<>"(),;:\\[\]]/.test(email)) return null;
  if (name && !PLAIN_NAME.test(name)) return null;
  const value = name ? `${name} <${email}>` : email;
  return `To: ${value}`.length <= 76 ? value : null;
}

/** RFC 5322 date as MailComposer writes it ("Wed, 25 Nov 2026 21:21:44 +0000"). */
export function mailDate(d: Date): string {
  return d.toUTCString().replace(/GMT/, '+0000');
}

/** What every message of a transmission shares: buildMessage's input without the recipient's fields. */
export type SharedInput = Omit<BuildMessageInput, 'to' | 'messageId' | 'date'>;

/**
 * Placeholders in the input that each message replaces with a string of the same length, and how
 * often each was put in. A marker is made of `A-Za-z0-9_-` only and is never next to another such
 * character where it is put (findRuns).
 */
export type Markers = ReadonlyMap<string, number>;

/**
 * Runs of token characters, joined across quoted-printable soft line breaks (`=\r\n`): a marker
 * (a placeholder token, tracking/render-plan.ts) is always a whole run, since what surrounds it
 * in the html and headers (`/c/`, `"`, `>`, `+`, `@`) is not a token character.
 */
const RUN = /[A-Za-z0-9_-]+(?:=\r\n[A-Za-z0-9_-]+)*/g;

/**
 * Each run of `text` that is a marker: the offset of each of its characters, soft breaks stepped
 * over. One pass over the text whatever the number of markers (a scan per marker was quadratic in
 * the number of links: 10,000 links, 10,000 scans of a body of a megabyte).
 */
function findRuns(text: string, markers: ReadonlyMap<string, unknown>, found: (marker: string, at: number[]) => void) {
  for (const m of text.matchAll(RUN)) {
    const run = m[0];
    const plain = run.includes('=') ? run.replaceAll('=\r\n', '') : run;
    if (!markers.has(plain)) continue;
    const at: number[] = [];
    const start = m.index ?? 0;
    for (let i = 0; i < run.length; i++) {
      if (run.charCodeAt(i) === 61 /* = */) i += 2;
      else at.push(start + i);
    }
    found(plain, at);
  }
}

function findSlots(lines: string[], bodyText: string, relaxedText: string, markers: Markers): Slot[] | null {
  const slots = new Map<string, Slot>();
  for (const marker of markers.keys()) slots.set(marker, { marker, head: [], body: [], relaxed: [] });
  for (const [line, l] of lines.entries()) {
    findRuns(l, slots, (marker, at) => {
      slots.get(marker)?.head.push({ line, col: at[0] ?? 0 });
    });
  }
  findRuns(bodyText, slots, (marker, at) => {
    slots.get(marker)?.body.push(at);
  });
  findRuns(relaxedText, slots, (marker, at) => {
    slots.get(marker)?.relaxed.push(at);
  });
  for (const [marker, expected] of markers) {
    const slot = slots.get(marker) as Slot;
    if (slot.head.length + slot.body.length !== expected || slot.relaxed.length !== slot.body.length) return null;
  }
  return [...slots.values()];
}

/**
 * Occurrences (the offset of each of a marker's characters) as runs of consecutive offsets, flat:
 * [offset, first character, end character, ...]; a token is one run, or two where quoted-printable
 * broke its line. Each message then writes a run with one Buffer.write, not a byte at a time.
 */
function toRuns(occurrences: number[][]): number[] {
  const runs: number[] = [];
  for (const at of occurrences) {
    let from = 0;
    for (let i = 1; i <= at.length; i++) {
      if (i < at.length && at[i] === (at[i - 1] as number) + 1) continue;
      runs.push(at[from] as number, from, i);
      from = i;
    }
  }
  return runs;
}

/**
 * Writes the replacement's characters (`src` from `at`: token characters, ASCII) over each run of `runs`
 * (toRuns) in `buf`, whose offsets start at `base`. A byte loop: a message's ~21 tokens are ~42 short writes (body and relaxed
 * body), and a Buffer.write call each cost more in call overhead than the bytes.
 */
function patch(buf: Buffer, runs: number[], src: string, at: number, base = 0): void {
  for (let k = 0; k < runs.length; k += 3) {
    let o = base + (runs[k] as number);
    const to = at + (runs[k + 2] as number);
    for (let i = at + (runs[k + 1] as number); i < to; i++) buf[o++] = src.charCodeAt(i);
  }
}

/**
 * One message's replacement of a shared body's markers: marker n becomes the marker's length of
 * characters of `text` (token characters, ASCII) from `at[n]`.
 */
export interface Replacements {
  text: string;
  at: readonly number[];
}

async function compose(input: SharedInput, markers: Markers | undefined): Promise<SharedBody | null> {
  const raw = await buildMessage({
    ...input,
    to: { email: PLACEHOLDER_TO },
    messageId: PLACEHOLDER_ID,
    date: new Date(0),
  });
  const text = raw.toString('latin1');
  const split = text.indexOf('\r\n\r\n');
  if (split < 0) return null;
  const lines = text.slice(0, split).split('\r\n');
  const toAt = lines.indexOf(`To: ${PLACEHOLDER_TO}`);
  const idAt = lines.indexOf(`Message-ID: <${PLACEHOLDER_ID}>`);
  const dateAt = lines.indexOf(`Date: ${mailDate(new Date(0))}`);
  if (toAt < 0 || idAt < 0 || dateAt < 0) return null;
  const body = raw.subarray(split + 4);
  const bodyText = body.toString('latin1');
  const tracked = !!markers && markers.size > 0;
  const relaxedText = tracked ? relaxedBody(bodyText) : '';
  const slots = tracked ? findSlots(lines, bodyText, relaxedText, markers) : [];
  if (!slots) return null;
  let relaxed: SharedBody['relaxed'] = null;
  if (tracked) {
    // Hash the bytes before the first marker once; messages continue from that state.
    let first = relaxedText.length;
    for (const s of slots) for (const at of s.relaxed) first = Math.min(first, at[0] ?? first);
    const bytes = Buffer.from(relaxedText, 'latin1');
    for (const s of slots) s.relaxed = s.relaxed.map((at) => at.map((i) => i - first));
    relaxed = { prefix: createHash('sha256').update(bytes.subarray(0, first)), rest: bytes.subarray(first) };
  }
  const markerList = slots.map((s) => s.marker);
  const runs = slots.map((s) => ({ body: toRuns(s.body), relaxed: toRuns(s.relaxed) }));
  return {
    lines,
    toAt,
    idAt,
    dateAt,
    body,
    bodyHash: dkimBodyHash(bodyText),
    slots,
    markers: markerList,
    runs,
    relaxed,
  };
}

/**
 * The message's header block and the shared body, or null when a shared body does not apply
 * (the caller then composes the message itself). `shared` is called only to compose the body;
 * with `markers`, `fill` gives this message's replacement of each marker it is given, in that
 * order, as one text (Replacements). It is given the same array for every message of a body.
 * Throws the RenderError that composing the body met (see Kept).
 */
export async function fromSharedBody(
  transmissionId: string,
  to: { email: string; name?: string },
  messageId: string,
  shared: () => SharedInput & { markers?: Markers },
  date: Date = new Date(),
  fill?: (markers: readonly string[]) => Replacements,
): Promise<SharedBodyParts | null> {
  const toValue = plainTo(to.email, to.name);
  if (toValue === null || !ASCII_ADDRESS.test(messageId)) return null;
  let kept = sharedBodies.get(transmissionId);
  if (!kept) {
    let pending = composing.get(transmissionId);
    if (!pending) {
      const cache = sharedBodies;
      pending = (async () => {
        const { markers, ...input } = shared();
        return compose(input, markers);
      })()
        .catch((err: unknown) => (err instanceof RenderError ? err : null))
        .then((composed) => {
          const k: Kept = composed instanceof RenderError ? { body: null, renderError: composed } : { body: composed };
          cache.set(transmissionId, k);
          composing.delete(transmissionId);
          return k;
        });
      composing.set(transmissionId, pending);
    }
    kept = await pending;
  }
  const t = kept.body;
  if (kept.renderError) throw kept.renderError;
  if (!t) return null;
  const lines = t.lines.slice();
  lines[t.toAt] = `To: ${toValue}`;
  lines[t.idAt] = `Message-ID: <${messageId}>`;
  lines[t.dateAt] = `Date: ${mailDate(date)}`;
  if (t.slots.length === 0)
    return { head: lines.join('\r\n'), body: t.body, bodyHash: t.bodyHash, bodyLength: t.body.length };
  if (!fill || !t.relaxed) return null;
  const { text, at } = fill(t.markers);
  const relaxed = t.relaxed.rest;
  for (const [n, slot] of t.slots.entries()) {
    const from = at[n] ?? -1;
    const len = slot.marker.length;
    if (from < 0 || from + len > text.length) return null;
    for (const { line, col } of slot.head) {
      const l = lines[line] ?? '';
      lines[line] = l.slice(0, col) + text.slice(from, from + len) + l.slice(col + len);
    }
    patch(relaxed, (t.runs[n] as SharedBody['runs'][number]).relaxed, text, from);
  }
  // The body's tokens are written where the body is (messageBytes, or `body` when read): t.body,
  // t.runs and `text` do not change, so writing later gives the same bytes.
  const writeBody = (out: Buffer, base: number) => {
    t.body.copy(out, base);
    for (let n = 0; n < t.slots.length; n++)
      patch(out, (t.runs[n] as SharedBody['runs'][number]).body, text, at[n] as number, base);
  };
  let body: Buffer | null = null;
  return {
    head: lines.join('\r\n'),
    get body() {
      if (!body) {
        body = Buffer.allocUnsafe(t.body.length);
        writeBody(body, 0);
      }
      return body;
    },
    // dkim.ts dkimBodyHash: SHA-256 of the relaxed body's latin1 bytes, base64.
    bodyHash: t.relaxed.prefix.copy().update(relaxed).digest('base64'),
    writeBody,
    bodyLength: t.body.length,
  };
}

/** Forgets every shared body; a test may give the byte budget of the new cache. */
export function clearSharedBodies(budgetBytes: number = SHARED_BODY_BYTES): void {
  sharedBodies = newCache(budgetBytes);
  composing.clear();
}

/** The shared bodies kept and their bytes (tests). */
export function sharedBodyStats(): { entries: number; bytes: number } {
  return { entries: sharedBodies.size, bytes: sharedBodies.calculatedSize };
}
