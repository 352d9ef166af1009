/**
 * What content must satisfy before it is stored (a template version) or accepted (inline
 * transmission content): the language's syntax in every part (422 naming the part and line),
 * From / Reply-To as exactly one mailbox whose address is literal (only the display name may use
 * the language), header names that are not Postyard's own, and no control characters in any
 * header-bound source. Field names are prefixed (`content.` for transmissions).
 * The language's syntax is checked on the template sandbox's threads (template-sandbox.ts),
 * never on the event loop.
 */
import { checkMailbox, hasControlChars } from '../../lib/email.ts';
import { htmlDepthProblems } from '../../lib/html-depth.ts';
import { usesLanguage } from './template-language.ts';
import { templateSandbox } from './template-sandbox.ts';
import { type ContentFields, HEADER_NAME, RESERVED_HEADERS } from './stored-content.ts';

export type Problem = { field: string; message: string };

/** Header name rules shared with transmissions (docs/api.md "content.headers"). */
export function headerNameProblem(name: string): string | null {
  if (!HEADER_NAME.test(name)) return 'header name must be printable ASCII without ":" or spaces';
  if (RESERVED_HEADERS.has(name.toLowerCase())) return `header ${name} is set by Postyard and cannot be overridden`;
  return null;
}

/** One mailbox; its address literal. Returns the problem, or null. */
export function mailboxProblem(value: string): string | null {
  const m = checkMailbox(value);
  if ('error' in m) return m.error;
  if (usesLanguage(m.mailbox.email)) return 'may use {{...}} only in the display name, not in the address';
  return null;
}

/** Syntax problems of every part, named `<prefix><part>` (e.g. `content.html: line 3: ...`). */
export function languageProblems(f: Partial<ContentFields>, prefix: string): Promise<Problem[]> {
  const parts: Record<string, string | null | undefined> = {
    [`${prefix}subject`]: f.subject,
    [`${prefix}text`]: f.text,
    [`${prefix}html`]: f.html,
  };
  for (const key of ['from', 'reply_to'] as const) {
    const v = f[key];
    const m = typeof v === 'string' ? checkMailbox(v) : null;
    if (m && 'mailbox' in m && m.mailbox.name) parts[`${prefix}${key}`] = m.mailbox.name;
  }
  for (const [name, value] of Object.entries(f.headers ?? {})) parts[`${prefix}headers.${name}`] = value;
  return templateSandbox.syntaxProblems(parts);
}

/** Every rule above but the language's syntax (languageProblems): checks that cost no thread. */
export function fieldProblems(f: Partial<ContentFields>, prefix = ''): Problem[] {
  const problems: Problem[] = [];
  if (typeof f.subject === 'string' && hasControlChars(f.subject))
    problems.push({ field: `${prefix}subject`, message: 'subject must not contain control characters (CR/LF)' });
  for (const key of ['from', 'reply_to'] as const) {
    const v = f[key];
    if (typeof v !== 'string') continue;
    const p = mailboxProblem(v);
    if (p) problems.push({ field: `${prefix}${key}`, message: `${key} ${p}` });
  }
  for (const [name, value] of Object.entries(f.headers ?? {})) {
    const field = `${prefix}headers.${name}`;
    const p = headerNameProblem(name);
    if (p) problems.push({ field, message: p });
    if (hasControlChars(value))
      problems.push({ field, message: 'header value must not contain CR, LF or other control characters' });
  }
  problems.push(...htmlDepthProblems(f.html, `${prefix}html`));
  return problems;
}

/** Every rule above, for a template version (prefix '') or any other content. */
export async function contentProblems(f: Partial<ContentFields>, prefix = ''): Promise<Problem[]> {
  return [...fieldProblems(f, prefix), ...(await languageProblems(f, prefix))];
}
