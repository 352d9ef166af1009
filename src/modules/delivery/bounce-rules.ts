/**
 * Bounce classification as data, and the delivery retry schedule.
 *
 * Design notes
 * - The reply class decides what happens: 4xx (or an enhanced 4.x.x) is transient and the message
 *   is deferred and retried; 5xx is a permanent failure and the message bounces. The rules only
 *   name the kind of failure (bounce type, category) and whether it proves the address bad.
 * - Rules are an ordered table, first match wins: exact RFC 3463 codes first, then wording for
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

/** Absent or generic (X.0.0) enhanced code: the wording is all there is to go on. */
const NO_SPECIFIC_CODE = /^(?:[245]\.0\.0)?$/;

const BAD_MAILBOX_TEXT =
  /user unknown|unknown user|no such user|no such (?:mailbox|recipient)|(?:mailbox|user|account|address|recipient)(?: name)? (?:does not|doesn't) exist|mailbox not found|invalid (?:mailbox|recipient)|recipient (?:not found|unknown)|user not found|not a valid (?:mailbox|recipient)|no mailbox here/i;
const MAILBOX_FULL_TEXT =
  /mailbox (?:is )?full|over ?quota|quota exceeded|exceeded (?:storage|quota)|insufficient storage/i;
const SPAM_TEXT = /spam|blacklist|blocklist|block ?list|blocked|spamhaus|reputation|\brbl\b|dnsbl/i;
const TOO_LARGE_TEXT = /too (?:large|big)|size (?:limit|exceeds)|exceeds (?:the )?(?:maximum|size)/i;
const RATE_TEXT = /rate limit|too many (?:messages|connections|recipients)|try again later|throttl/i;

/** The rule table, first match wins. Exported so operators and tests can read (or extend) it. */
export const BOUNCE_RULES: readonly BounceRule[] = [
  // Exact RFC 3463 codes that prove the address bad (docs/api.md "Suppressions").
  { id: 'bad-mailbox', match: { enhanced: '5.1.1' }, bounceType: 'hard', category: 'bad_mailbox', suppress: true },
  { id: 'bad-domain', match: { enhanced: '5.1.2' }, bounceType: 'hard', category: 'bad_domain', suppress: true },
  { id: 'bad-syntax', match: { enhanced: '5.1.3' }, bounceType: 'hard', category: 'bad_mailbox', suppress: true },
  { id: 'null-mx', match: { enhanced: '5.1.10' }, bounceType: 'hard', category: 'bad_domain', suppress: true },
  { id: 'mailbox-moved', match: { enhanced: '5.1.6' }, bounceType: 'hard', category: 'bad_mailbox', suppress: false },
  {
    id: 'mailbox-disabled',
    match: { enhanced: '5.2.1' },
    bounceType: 'hard',
    category: 'mailbox_disabled',
    suppress: false,
  },
  {
    id: 'mailbox-full',
    match: { enhanced: /^[45]\.2\.2$/ },
    bounceType: 'soft',
    category: 'mailbox_full',
    suppress: false,
  },
  {
    id: 'too-large',
    match: { enhanced: /^[45]\.(?:2\.3|3\.4)$/ },
    bounceType: 'soft',
    category: 'message_too_large',
    suppress: false,
  },
  {
    id: 'auth-failure',
    match: { enhanced: /^5\.7\.(?:2[3-7])$/ },
    bounceType: 'block',
    category: 'authentication',
    suppress: false,
  },
  {
    id: 'spam-block',
    match: { enhanced: '5.7', text: SPAM_TEXT },
    bounceType: 'block',
    category: 'spam_block',
    suppress: false,
  },
  { id: 'policy-block', match: { enhanced: '5.7' }, bounceType: 'block', category: 'policy', suppress: false },

  // Wording, when no specific enhanced code says otherwise.
  {
    id: 'text-bad-mailbox',
    match: { enhanced: NO_SPECIFIC_CODE, text: BAD_MAILBOX_TEXT },
    bounceType: 'hard',
    category: 'bad_mailbox',
    suppress: true,
  },
  {
    id: 'text-mailbox-full',
    match: { enhanced: NO_SPECIFIC_CODE, text: MAILBOX_FULL_TEXT },
    bounceType: 'soft',
    category: 'mailbox_full',
    suppress: false,
  },
  {
    id: 'text-too-large',
    match: { enhanced: NO_SPECIFIC_CODE, text: TOO_LARGE_TEXT },
    bounceType: 'soft',
    category: 'message_too_large',
    suppress: false,
  },
  {
    id: 'text-spam-block',
    match: { enhanced: NO_SPECIFIC_CODE, text: SPAM_TEXT },
    bounceType: 'block',
    category: 'spam_block',
    suppress: false,
  },
  {
    id: 'text-rate-limit',
    match: { enhanced: NO_SPECIFIC_CODE, text: RATE_TEXT },
    bounceType: 'soft',
    category: 'rate_limit',
    suppress: false,
  },

  // RFC 3463 subjects, either class.
  { id: 'transient-policy', match: { enhanced: '4.7' }, bounceType: 'soft', category: 'policy', suppress: false },
  { id: 'address', match: { enhanced: /^5\.1\./ }, bounceType: 'hard', category: 'bad_mailbox', suppress: false },
  { id: 'mailbox', match: { enhanced: /^[45]\.2\./ }, bounceType: 'soft', category: 'other', suppress: false },
  { id: 'system', match: { enhanced: /^[45]\.3\./ }, bounceType: 'soft', category: 'system', suppress: false },
  { id: 'routing', match: { enhanced: /^[45]\.4\./ }, bounceType: 'soft', category: 'routing', suppress: false },
  { id: 'protocol', match: { enhanced: /^[45]\.5\./ }, bounceType: 'soft', category: 'protocol', suppress: false },
  { id: 'content', match: { enhanced: /^[45]\.6\./ }, bounceType: 'soft', category: 'content', suppress: false },

  // Reply code alone.
  { id: 'transient', match: { code: [400, 499] }, bounceType: 'soft', category: 'other', suppress: false },
  { id: 'permanent', match: { code: [500, 599] }, bounceType: 'hard', category: 'other', suppress: false },
];

const ENHANCED_RE = /^([245])\.(\d{1,3})\.(\d{1,3})$/;

/** Classifies a failed SMTP reply (or DSN status). Without any code the failure counts as transient. */
export function classifyBounce(input: BounceInput, rules: readonly BounceRule[] = BOUNCE_RULES): BounceClassification {
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
