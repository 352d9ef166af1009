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

/** Trims and lower-cases the domain part (local parts are case-sensitive by RFC 5321). */
export function normalizeEmail(email: string): string {
  const trimmed = email.trim();
  const at = trimmed.lastIndexOf('@');
  if (at < 0) return trimmed;
  return `${trimmed.slice(0, at)}@${trimmed.slice(at + 1).toLowerCase()}`;
}

export function domainOf(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1).toLowerCase();
}

export interface Mailbox {
  name: string | null;
  email: string;
}

/** Parses `addr@x.y` or `Display Name <addr@x.y>` (name optionally quoted). Null if invalid. */
export function parseMailbox(value: string): Mailbox | null {
  if (hasControlChars(value)) return null;
  const v = value.trim();
  const m = /^(.*?)\s*<([^<>]+)>$/.exec(v);
  if (m) {
    let name = (m[1] ?? '').trim();
    if (name.startsWith('"') && name.endsWith('"') && name.length >= 2) name = name.slice(1, -1);
    const email = (m[2] ?? '').trim();
    return isValidEmail(email) ? { name: name || null, email: normalizeEmail(email) } : null;
  }
  return isValidEmail(v) ? { name: null, email: normalizeEmail(v) } : null;
}
