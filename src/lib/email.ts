import libmime from 'libmime';
import addressparser from 'nodemailer/lib/addressparser/index.js';

/**
 * Address validation and parsing shared by the API and SMTP paths. Deliberately strict about
 * control characters: a CR or LF in an address or header value is header injection.
 */
const LOCAL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+$/;
const LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

export function hasControlChars(value: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: detecting them is the point
  return /[\u0000-\u001f\u007f]/.test(value);
}

export function isValidDomain(domain: string): boolean {
  if (domain.length < 1 || domain.length > 253) return false;
  const labels = domain.split('.');
  if (labels.length < 2) return false;
  return labels.every((l) => LABEL.test(l)) && !/^\d+$/.test(labels[labels.length - 1] ?? '');
}

export function isValidEmail(email: string): boolean {
  if (email.length > 320 || hasControlChars(email)) return false;
  const at = email.lastIndexOf('@');
  if (at < 1) return false;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local) || local.startsWith('.') || local.endsWith('.') || local.includes('..')) {
    return false;
  }
  return isValidDomain(domain);
}

/**
 * The one identity of a recipient address: trimmed and lower-cased as a whole. De-duplication,
 * suppressions (create, upsert, CSV import, automatic), the suppression `identifier` filter and
 * the events `recipient` filter all use it, so `Ann@x.test` and `ann@x.test` are one address
 * everywhere. RFC 5321 lets a receiver treat local parts as case-sensitive, but mailbox
 * providers do not, and every email service suppresses case-insensitively: a case variant must
 * never slip past an unsubscribe or a hard bounce.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** A sender address as written, with only the domain lower-cased (shown to recipients). */
function lowerDomain(email: string): string {
  const at = email.lastIndexOf('@');
  return `${email.slice(0, at)}@${email.slice(at + 1).toLowerCase()}`;
}

export function domainOf(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1).toLowerCase();
}

export interface Mailbox {
  name: string | null;
  email: string;
}

export type MailboxCheck = { mailbox: Mailbox } | { error: string };

/** Things in a display name that read as an address (`x@y`), checked after decoding. */
const ADDRESS_LIKE = /[^\s<>()[\]"',;:@]+@[^\s<>()[\]"',;:@]+/g;

/** RFC 2047 encoded words decoded: a name is judged by what a mail client will display. */
export function decodeWords(value: string): string {
  return value.includes('=?') ? libmime.decodeWords(value) : value;
}

/**
 * True when a display name shows an address other than `address` (a name showing the
 * mailbox's own address, as Outlook writes it, is fine).
 */
export function nameShowsOtherAddress(name: string, address: string): boolean {
  const own = address.toLowerCase();
  return (name.match(ADDRESS_LIKE) ?? []).some((a) => a.toLowerCase() !== own);
}

/**
 * Parses a From / Reply-To / default sender value into exactly one mailbox, with the parser the
 * MIME builder uses (nodemailer's addressparser), so the address checked is the address sent.
 * Refuses lists, groups, a missing or invalid address and display names that show another
 * address (`"ceo@bank.test" <me@mine.test>`, or text after the address such as
 * `Boss <ceo@a.test> <me@mine.test>`, which addressparser folds into the name).
 */
export function checkMailbox(value: string): MailboxCheck {
  if (hasControlChars(value)) return { error: 'must not contain control characters (CR/LF)' };
  const entries = addressparser(value);
  if (entries.length > 1) {
    return { error: 'must be exactly one address (quote a display name that contains a comma)' };
  }
  const entry = entries[0];
  if (!entry) return { error: 'must be an address like "Name <user@example.com>"' };
  if ('group' in entry) return { error: 'must be one address, not a group' };
  const address = entry.address.trim();
  if (!isValidEmail(address)) return { error: 'must be an address like "Name <user@example.com>"' };
  const name = decodeWords(entry.name ?? '').trim();
  if (hasControlChars(name)) return { error: 'display name must not contain control characters' };
  // Decoding must be final: a name that still decodes would read differently in some clients.
  if (decodeWords(name) !== name) return { error: 'display name must not hold encoded words within encoded words' };
  if (nameShowsOtherAddress(name, address)) return { error: 'display name must not contain another address' };
  return { mailbox: { name: name || null, email: lowerDomain(address) } };
}

/** checkMailbox's mailbox, or null when the value is not exactly one acceptable mailbox. */
export function parseMailbox(value: string): Mailbox | null {
  const res = checkMailbox(value);
  return 'mailbox' in res ? res.mailbox : null;
}

/**
 * The stored form of a mailbox: `Name <address>`, `"Name, Inc." <address>` or `address`. checkMailbox reads it back as
 * the same mailbox (names are quoted, quotes and backslashes escaped, control characters dropped).
 */
export function formatMailbox(m: Mailbox): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
  const name = (m.name ?? '').replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  if (!name) return m.email;
  // Plain words stay unquoted (as nodemailer writes them); anything else is a quoted string.
  return /^[A-Za-z0-9_ ']+$/.test(name) ? `${name} <${m.email}>` : `"${name.replace(/["\\]/g, '\\$&')}" <${m.email}>`;
}
