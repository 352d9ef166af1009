import { domainToASCII } from 'node:url';
import { isValidDomain } from '../../lib/email.ts';

/** Trimmed, lower-case, without the trailing dot, IDNs as punycode; null when not a valid name. */
export function normalizeDomain(input: string): string | null {
  const trimmed = input.trim().replace(/\.$/, '');
  if (trimmed === '' || /\s/.test(trimmed)) return null;
  const ascii = domainToASCII(trimmed.toLowerCase());
  return ascii && isValidDomain(ascii) ? ascii.toLowerCase() : null;
}

/**
 * `a.b.example.com` -> [`a.b.example.com`, `b.example.com`, `example.com`]: the From domain and
 * its parents down to two labels, most specific first. A verified domain covers its subdomains.
 */
export function candidateDomains(domain: string): string[] {
  const labels = domain.toLowerCase().replace(/\.$/, '').split('.');
  const out: string[] = [];
  for (let i = 0; i <= labels.length - 2; i++) out.push(labels.slice(i).join('.'));
  return out;
}
