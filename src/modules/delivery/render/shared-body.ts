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
import { createHash } from 'node:crypto';
import { dkimBodyHash, relaxedBody } from './dkim.ts';
import { type BuildMessageInput, buildMessage } from './mime.ts';

export interface SharedBodyParts {
  /** The header block of this message (no final CRLF), latin1 text. */
  head: string;
  /** The body bytes shared by every message of the transmission. */
  body: Buffer;
  /** DKIM bh= of `body`. */
  bodyHash: string;
}

interface SharedBody {
  lines: string[];
  toAt: number;
  idAt: number;
  dateAt: number;
  body: Buffer;
  bodyHash: string;
  slots: Slot[];
  /**
   * With slots: the body in DKIM relaxed canonical form (latin1), where the markers are found
   * again (relaxing only touches whitespace and line ends, which no marker holds), so each
   * message's body hash is one SHA-256 over a patched copy instead of canonicalizing again.
   */
  relaxed: Buffer | null;
}

/** Where one marker was written: header lines (never folded inside a token) and body bytes. */
interface Slot {
  marker: string;
  head: { line: number; col: number }[];
  /** Per occurrence in the body, the byte offset of each of the marker's characters. */
  body: number[][];
  /** The same in the relaxed body (SharedBody.relaxed). */
  relaxed: number[][];
}

const PLACEHOLDER_TO = 'recipient@placeholder.invalid';
const PLACEHOLDER_ID = 'message@placeholder.invalid';
const MAX_SHARED_BODIES = 64;
const PLAIN_NAME = /^[A-Za-z0-9]+(?: [A-Za-z0-9]+)*$/;
const ASCII_ADDRESS = /^[\x21-\x7e]+@[\x21-\x7e]+$/;

/** Shared bodies by transmission id; null = this transmission cannot use one. Oldest dropped first. */
const sharedBodies = new Map<string, Promise<SharedBody | null>>();

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
 * often each was put in. Markers must be ASCII without whitespace, `=` or `<>`.
 */
export type Markers = ReadonlyMap<string, number>;

/** Each occurrence of `marker` in the encoded body, allowing quoted-printable soft breaks inside. */
function findInBody(text: string, marker: string): number[][] {
  const re = new RegExp([...marker].map((ch) => ch.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')).join('(?:=\r\n)?'), 'g');
  const found: number[][] = [];
  for (const m of text.matchAll(re)) {
    const at: number[] = [];
    let j = 0;
    for (let i = 0; i < m[0].length && j < marker.length; i++) {
      if (m[0][i] === marker[j]) {
        at.push((m.index ?? 0) + i);
        j++;
      }
    }
    found.push(at);
  }
  return found;
}

function findSlots(lines: string[], bodyText: string, relaxedText: string, markers: Markers): Slot[] | null {
  const slots: Slot[] = [];
  for (const [marker, expected] of markers) {
    const head: Slot['head'] = [];
    lines.forEach((l, line) => {
      for (let col = l.indexOf(marker); col >= 0; col = l.indexOf(marker, col + marker.length))
        head.push({ line, col });
    });
    const body = findInBody(bodyText, marker);
    const relaxed = findInBody(relaxedText, marker);
    if (head.length + body.length !== expected || relaxed.length !== body.length) return null;
    slots.push({ marker, head, body, relaxed });
  }
  return slots;
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
  const relaxed = tracked ? Buffer.from(relaxedText, 'latin1') : null;
  return { lines, toAt, idAt, dateAt, body, bodyHash: dkimBodyHash(bodyText), slots, relaxed };
}

/**
 * The message's header block and the shared body, or null when a shared body does not apply
 * (the caller then composes the message itself). `shared` is called only to compose the body;
 * with `markers`, `fill` gives this message's replacement of each (same length).
 */
export async function fromSharedBody(
  transmissionId: string,
  to: { email: string; name?: string },
  messageId: string,
  shared: () => SharedInput & { markers?: Markers },
  date: Date = new Date(),
  fill?: (marker: string) => string,
): Promise<SharedBodyParts | null> {
  const toValue = plainTo(to.email, to.name);
  if (toValue === null || !ASCII_ADDRESS.test(messageId)) return null;
  let entry = sharedBodies.get(transmissionId);
  if (!entry) {
    entry = (async () => {
      const { markers, ...input } = shared();
      return compose(input, markers);
    })().catch(() => null);
    if (sharedBodies.size >= MAX_SHARED_BODIES) sharedBodies.delete(sharedBodies.keys().next().value as string);
    sharedBodies.set(transmissionId, entry);
  }
  const t = await entry;
  if (!t) return null;
  const lines = t.lines.slice();
  lines[t.toAt] = `To: ${toValue}`;
  lines[t.idAt] = `Message-ID: <${messageId}>`;
  lines[t.dateAt] = `Date: ${mailDate(date)}`;
  if (t.slots.length === 0) return { head: lines.join('\r\n'), body: t.body, bodyHash: t.bodyHash };
  if (!fill) return null;
  const body = Buffer.from(t.body);
  const relaxed = Buffer.from(t.relaxed ?? Buffer.alloc(0));
  for (const slot of t.slots) {
    const value = fill(slot.marker);
    if (value.length !== slot.marker.length) return null;
    for (const { line, col } of slot.head) {
      const l = lines[line] ?? '';
      lines[line] = l.slice(0, col) + value + l.slice(col + value.length);
    }
    for (const at of slot.body) for (let i = 0; i < at.length; i++) body[at[i] as number] = value.charCodeAt(i);
    for (const at of slot.relaxed) for (let i = 0; i < at.length; i++) relaxed[at[i] as number] = value.charCodeAt(i);
  }
  // dkim.ts dkimBodyHash: SHA-256 of the relaxed body's latin1 bytes, base64.
  return { head: lines.join('\r\n'), body, bodyHash: createHash('sha256').update(relaxed).digest('base64') };
}

/** Forgets every shared body (tests). */
export function clearSharedBodies(): void {
  sharedBodies.clear();
}
