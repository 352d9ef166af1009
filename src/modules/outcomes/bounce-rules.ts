import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/**
 * Bounce classification as data (config/bounce-rules.yaml), and the delivery retry schedule.
 *
 * Design notes
 * - The reply class decides what happens: 4xx (or an enhanced 4.x.x) is transient and the message
 *   is deferred and retried; 5xx is a permanent failure and the message bounces. The rules only
 *   name the kind of failure (bounce type, category) and whether it proves the address bad.
 * - Rules are an ordered table in config/bounce-rules.yaml, first match wins: exact RFC 3463 codes first, then wording for
 *   replies that carry no (or only a generic X.0.0) enhanced code, then RFC 3463 classes, then
 *   the reply-code fallback. Adding a provider quirk is adding a row, not code.
 * - Only proof of a bad address suppresses (docs/api.md "Suppressions"): 5.1.1, 5.1.2, 5.1.3, 5.1.10 and the
 *   classic "user unknown" wordings. Blocks (5.7.x), full mailboxes and everything else are
 *   reported, never suppressed: suppressing on a block would silently drop a whole provider's
 *   users after one bad day of reputation.
 */

export type BounceType = 'hard' | 'soft' | 'block';

export type BounceCategory =
  | 'bad_mailbox'
  | 'bad_domain'
  | 'mailbox_disabled'
  | 'mailbox_full'
  | 'message_too_large'
  | 'policy'
  | 'spam_block'
  | 'authentication'
  | 'rate_limit'
  | 'routing'
  | 'protocol'
  | 'content'
  | 'system'
  | 'other';

export interface BounceRule {
  /** Stable name, stored with the classification for metrics and debugging. */
  id: string;
  /** Every given field must match. `enhanced`: a string matches that code or any code under it
   * ('5.7' matches '5.7.1', '5.1.1' does not match '5.1.10'); a RegExp is tested on the code, or
   * on '' when there is none. `code`: inclusive range. `text`: tested on the reply text. */
  match: { enhanced?: RegExp | string; code?: [number, number]; text?: RegExp };
  bounceType: BounceType;
  category: BounceCategory;
  suppress: boolean;
}

export interface BounceInput {
  code?: number;
  enhancedCode?: string;
  text?: string;
}

export interface BounceClassification {
  /** True for 4xx: defer and retry. False: bounce now. */
  transient: boolean;
  bounceType: BounceType;
  category: BounceCategory;
  /** Add the recipient to the suppression list (never true for transient failures). */
  suppress: boolean;
  rule: string;
}

/** config/bounce-rules.yaml: from src/modules/outcomes/ and from dist/modules/outcomes/ alike. */
export const SHIPPED_BOUNCE_RULES_FILE = new URL('../../../config/bounce-rules.yaml', import.meta.url);

const BOUNCE_TYPES: readonly BounceType[] = ['hard', 'soft', 'block'];
const CATEGORIES: readonly BounceCategory[] = [
  'bad_mailbox',
  'bad_domain',
  'mailbox_disabled',
  'mailbox_full',
  'message_too_large',
  'policy',
  'spam_block',
  'authentication',
  'rate_limit',
  'routing',
  'protocol',
  'content',
  'system',
  'other',
];
const RULE_FIELDS = new Set([
  'id',
  'enhanced',
  'enhanced_pattern',
  'code',
  'text',
  'bounce_type',
  'category',
  'suppress',
]);

/**
 * Parses and checks a bounce-rules file (docs/pacing.md): the table moved out of code so that
 * adding a provider quirk is editing a file. Anything that breaks the rules throws, naming the
 * entry: a half-read table would classify silently wrong.
 */
export function parseBounceRules(text: string, source: string): BounceRule[] {
  let doc: unknown;
  try {
    doc = parseYaml(text, { uniqueKeys: true });
  } catch (err) {
    throw new Error(`${source}: not valid YAML: ${(err as Error).message}`);
  }
  const list = (doc as { rules?: unknown } | null)?.rules;
  if (!Array.isArray(list) || list.length === 0) throw new Error(`${source}: a non-empty "rules" list is required`);
  return list.map((raw, i) => {
    const where = `${source}: rules[${i}]`;
    const r = raw as Record<string, unknown>;
    if (typeof r !== 'object' || r === null || typeof r.id !== 'string' || !r.id)
      throw new Error(`${where}.id is required`);
    for (const k of Object.keys(r)) if (!RULE_FIELDS.has(k)) throw new Error(`${where}: unknown field "${k}"`);
    const regex = (field: string, flags: string) => {
      const v = r[field];
      if (typeof v !== 'string') throw new Error(`${where}.${field}: a regular expression (text) is required`);
      try {
        return new RegExp(v, flags);
      } catch (err) {
        throw new Error(`${where}.${field}: ${(err as Error).message}`);
      }
    };
    const match: BounceRule['match'] = {};
    if (r.enhanced !== undefined && r.enhanced_pattern !== undefined) {
      throw new Error(`${where}: enhanced or enhanced_pattern, not both`);
    }
    if (r.enhanced !== undefined) {
      if (typeof r.enhanced !== 'string' || !/^[245](?:\.\d{1,3}){0,2}$/.test(r.enhanced)) {
        throw new Error(`${where}.enhanced: an enhanced code or its prefix, e.g. '5.1.1' or '5.7'`);
      }
      match.enhanced = r.enhanced;
    }
    if (r.enhanced_pattern !== undefined) match.enhanced = regex('enhanced_pattern', '');
    if (r.code !== undefined) {
      const c = r.code;
      if (
        !Array.isArray(c) ||
        c.length !== 2 ||
        !c.every((n) => Number.isInteger(n) && n >= 200 && n <= 599) ||
        c[0] > c[1]
      ) {
        throw new Error(`${where}.code: [low, high] reply codes`);
      }
      match.code = [c[0], c[1]];
    }
    if (r.text !== undefined) match.text = regex('text', 'i');
    if (!BOUNCE_TYPES.includes(r.bounce_type as BounceType))
      throw new Error(`${where}.bounce_type: ${BOUNCE_TYPES.join(', ')}`);
    if (!CATEGORIES.includes(r.category as BounceCategory))
      throw new Error(`${where}.category: one of ${CATEGORIES.join(', ')}`);
    if (typeof r.suppress !== 'boolean') throw new Error(`${where}.suppress: true or false`);
    return {
      id: r.id,
      match,
      bounceType: r.bounce_type as BounceType,
      category: r.category as BounceCategory,
      suppress: r.suppress,
    };
  });
}

/** Reads a bounce-rules file (the shipped one when `path` is null). */
export function loadBounceRules(path: string | null): BounceRule[] {
  return parseBounceRules(readFileSync(path ?? SHIPPED_BOUNCE_RULES_FILE, 'utf8'), path ?? 'config/bounce-rules.yaml');
}

/** The shipped table, first match wins. Exported so operators and tests can read (or extend) it. */
export const BOUNCE_RULES: readonly BounceRule[] = loadBounceRules(null);

/** The table classifyBounce uses by default: the shipped one, or the operator's (installBounceRules). */
let activeRules: readonly BounceRule[] = BOUNCE_RULES;

/** Installs the operator's table (POSTYARD_BOUNCE_RULES_FILE), read at start. */
export function installBounceRules(rules: readonly BounceRule[]): void {
  activeRules = rules;
}

const ENHANCED_RE = /^([245])\.(\d{1,3})\.(\d{1,3})$/;

/** Classifies a failed SMTP reply (or DSN status). Without any code the failure counts as transient. */
export function classifyBounce(input: BounceInput, rules: readonly BounceRule[] = activeRules): BounceClassification {
  const enhanced = input.enhancedCode && ENHANCED_RE.test(input.enhancedCode) ? input.enhancedCode : '';
  const text = input.text ?? '';
  // The reply code is normative; the enhanced code stands in for it when a DSN gives only that.
  const klass = input.code ? Math.floor(input.code / 100) : enhanced ? Number(enhanced[0]) : 4;
  const code = input.code ?? klass * 100;
  const transient = klass !== 5;

  for (const rule of rules) {
    if (!matches(rule, code, enhanced, text)) continue;
    return {
      transient,
      bounceType: transient ? 'soft' : rule.bounceType,
      category: rule.category,
      suppress: !transient && rule.suppress,
      rule: rule.id,
    };
  }
  return { transient, bounceType: transient ? 'soft' : 'hard', category: 'other', suppress: false, rule: 'none' };
}

function matches(rule: BounceRule, code: number, enhanced: string, text: string): boolean {
  const m = rule.match;
  if (m.code && (code < m.code[0] || code > m.code[1])) return false;
  if (m.enhanced !== undefined) {
    if (typeof m.enhanced === 'string') {
      if (!(enhanced === m.enhanced || enhanced.startsWith(`${m.enhanced}.`))) return false;
    } else if (!m.enhanced.test(enhanced)) {
      return false;
    }
  }
  if (m.text && !m.text.test(text)) return false;
  return true;
}

/** Give up this long after acceptance (docs/api.md "Transmissions": about 72 h), then emit message.failed. */
export const MAX_RETRY_AGE_MS = 72 * 60 * 60 * 1000;

const MINUTE = 60_000;
/** Delay before retry n (1-based); the last step repeats. */
export const RETRY_SCHEDULE_MS: readonly number[] = [1, 5, 15, 30, 60, 120, 240].map((m) => m * MINUTE);

/**
 * Delay before the next try after `attemptNumber` failed attempts (1 = after the first failure),
 * with +-10% jitter so a burst of deferrals does not come back as a burst.
 */
export function retryDelayMs(attemptNumber: number, random: () => number = Math.random): number {
  const index = Math.min(Math.max(1, Math.floor(attemptNumber)), RETRY_SCHEDULE_MS.length) - 1;
  const base = RETRY_SCHEDULE_MS[index] ?? 4 * 60 * MINUTE;
  return Math.round(base * (0.9 + 0.2 * random()));
}

/**
 * When to try again, or null when the next try would fall past MAX_RETRY_AGE_MS after acceptance
 * (the message then fails).
 */
export function nextAttemptAt(
  attemptNumber: number,
  acceptedAtMs: number,
  nowMs: number,
  random?: () => number,
): number | null {
  const at = nowMs + retryDelayMs(attemptNumber, random);
  return at - acceptedAtMs > MAX_RETRY_AGE_MS ? null : at;
}
