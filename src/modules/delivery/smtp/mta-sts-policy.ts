/**
 * MTA-STS (RFC 8461) as pure functions: the `_mta-sts` TXT record, the policy file, and whether
 * an MX host name matches the policy's `mx` patterns. The fetching and caching are in mta-sts.ts.
 */

export type MtaStsMode = 'enforce' | 'testing' | 'none';

export interface MtaStsPolicy {
  mode: MtaStsMode;
  /** Lower-case MX patterns: `mx.example.com` or `*.example.com` (one leftmost label). */
  mx: string[];
  /** Seconds the policy may be cached (RFC 8461 3.2: at most 31557600). */
  maxAge: number;
  /** The `id` of the TXT record the policy was fetched under. */
  id: string;
}

/** RFC 8461 3.2: max_age is at most 31557600 seconds (about a year). */
export const MAX_AGE_LIMIT = 31_557_600;

/**
 * The policy id of a domain's `_mta-sts` TXT records (each given as its character-strings), or
 * null when there is no valid record. RFC 8461 3.1: records not starting with `v=STSv1` are
 * ignored; more than one STSv1 record means no policy; `id` is 1-32 letters and digits.
 */
export function parseStsTxt(records: string[][]): string | null {
  const sts = records.map((chunks) => chunks.join('')).filter((r) => /^v=STSv1\s*(;|$)/.test(r));
  if (sts.length !== 1) return null;
  let id: string | null = null;
  for (const field of (sts[0] as string).split(';')) {
    const m = /^\s*([A-Za-z0-9_.-]+)=([\x21-\x3a\x3c\x3e-\x7e]*)\s*$/.exec(field);
    if (!m) {
      if (field.trim() === '') continue;
      return null;
    }
    if (m[1] === 'id') id = m[2] ?? null;
  }
  return id !== null && /^[A-Za-z0-9]{1,32}$/.test(id) ? id : null;
}

/**
 * Parses a policy file (RFC 8461 3.2): `key: value` lines separated by LF or CRLF; unknown keys
 * are ignored. Returns an error text when the policy is not valid (then there is no policy).
 */
export function parsePolicy(
  text: string,
  id: string,
): { ok: true; policy: MtaStsPolicy } | { ok: false; error: string } {
  const fields = new Map<string, string>();
  const mx: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') continue;
    const m = /^([A-Za-z0-9_]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!m) return { ok: false, error: `policy line is not "key: value": ${JSON.stringify(line.slice(0, 80))}` };
    const key = m[1] as string;
    const value = m[2] as string;
    if (key === 'mx') mx.push(value.toLowerCase().replace(/\.$/, ''));
    else if (!fields.has(key)) fields.set(key, value);
  }
  if (fields.get('version') !== 'STSv1') return { ok: false, error: 'policy has no "version: STSv1"' };
  const mode = fields.get('mode');
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none') {
    return { ok: false, error: `policy mode must be enforce, testing or none, not ${JSON.stringify(mode ?? '')}` };
  }
  const maxAgeText = fields.get('max_age') ?? '';
  if (!/^\d{1,10}$/.test(maxAgeText)) return { ok: false, error: 'policy has no valid max_age' };
  const maxAge = Math.min(Number(maxAgeText), MAX_AGE_LIMIT);
  for (const p of mx) {
    if (!/^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(p)) {
      return { ok: false, error: `policy mx pattern is not a host name: ${JSON.stringify(p.slice(0, 80))}` };
    }
  }
  if (mode !== 'none' && mx.length === 0) return { ok: false, error: 'policy has no mx line' };
  return { ok: true, policy: { mode, mx, maxAge, id } };
}

/**
 * RFC 8461 4.1: an MX host matches a pattern exactly, or `*.example.com` matches exactly one
 * label in front of `example.com` (not `example.com` itself, not `a.b.example.com`).
 */
export function mxMatches(host: string, patterns: readonly string[]): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return patterns.some((p) => {
    if (!p.startsWith('*.')) return h === p;
    const dot = h.indexOf('.');
    return dot > 0 && h.slice(dot + 1) === p.slice(2);
  });
}
