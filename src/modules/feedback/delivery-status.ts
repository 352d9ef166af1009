/** What a report says of one recipient: a DSN's per-recipient group, or a plain-text bounce's guess. */
export interface RecipientStatus {
  /** Final-Recipient (else Original-Recipient); null when a plain-text bounce names none. */
  recipient: string | null;
  action: 'failed' | 'delayed' | 'other';
  smtpCode: number | null;
  enhancedCode: string | null;
  diagnostic: string;
  remoteMta: string | null;
}

/**
 * The fields of a `message/delivery-status` body (RFC 3464) and of an ARF
 * `message/feedback-report` (RFC 5965): header-like `Name: value` lines with folding, in groups
 * separated by blank lines (a DSN's first group is about the message, each further group about
 * one recipient).
 */
export type FieldGroup = Map<string, string>;

/** Most groups any report may have (a DSN for 1,000 recipients would be a forged one here). */
const MAX_GROUPS = 1000;

export function parseFieldGroups(text: string): FieldGroup[] {
  const groups: FieldGroup[] = [];
  let current: FieldGroup | null = null;
  let last: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') {
      current = null;
      last = null;
      continue;
    }
    if (/^[ \t]/.test(line) && current && last) {
      current.set(last, `${current.get(last) ?? ''} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    if (!current) {
      if (groups.length >= MAX_GROUPS) break;
      current = new Map();
      groups.push(current);
    }
    last = line.slice(0, colon).trim().toLowerCase();
    // The first occurrence wins (ARF may repeat some fields; we read one of each).
    if (!current.has(last)) current.set(last, line.slice(colon + 1).trim());
    else last = null;
  }
  return groups;
}

/** `rfc822; bob@example.net` -> `bob@example.net` (address types per RFC 3464 2.3.2). */
export function addressField(value: string | undefined): string | null {
  if (!value) return null;
  const semi = value.indexOf(';');
  const addr = (semi >= 0 ? value.slice(semi + 1) : value).trim().replace(/^<|>$/g, '');
  return addr || null;
}

export interface SmtpFigures {
  code: number | null;
  enhanced: string | null;
}

const REPLY_CODE = /(?:^|[\s(#:;])([45]\d\d)(?=[\s-]|$)/;
// `550-5.1.1` (multi-line replies) and `(#5.1.1)` (qmail) included.
const ENHANCED = /(?:^|[\s(#:;<-])([245]\.\d{1,3}\.\d{1,3})(?=[\s>),;.]|$)/;

/** The reply code and enhanced status code found in a diagnostic text, if any. */
export function smtpFigures(text: string): SmtpFigures {
  const code = REPLY_CODE.exec(text);
  const enhanced = ENHANCED.exec(text);
  return { code: code?.[1] ? Number(code[1]) : null, enhanced: enhanced?.[1] ?? null };
}

/** `smtp; 550 5.1.1 <x>: Recipient address rejected` -> the text after the type. */
export function diagnosticText(value: string | undefined): string | null {
  if (!value) return null;
  const semi = value.indexOf(';');
  const text = (semi >= 0 && semi < 20 ? value.slice(semi + 1) : value).trim();
  return text || null;
}
