/**
 * What the renderer does for tracking (docs/tracking.md): decided once per transmission on the
 * delivery worker (where the master key is) and handed to the render thread with the
 * transmission, as plain data.
 */
import { rewriteHtml } from './rewrite.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { messageIdBytes, messageSigner, signToken, TokenSet, type TrackingToken, verifyToken } from './token.ts';

export interface TrackingPlan {
  /** Tracking base URL, no trailing slash. */
  base: string;
  /** Token key (token.ts deriveTokenKey). */
  key: Uint8Array;
  open: boolean;
  click: boolean;
  /** Marketing mail: List-Unsubscribe (https + mailto) and List-Unsubscribe-Post. */
  unsubscribe: boolean;
  /** Feedback-ID value (every message). */
  feedbackId: string;
  /**
   * The transmission's link table (tracking/links.ts), index = its number: a link whose URL is in
   * it gets a version 2 click token naming the number, any other a token carrying its URL.
   */
  links?: readonly string[];
}

/** Gmail's Feedback-ID: up to four colon-separated fields, the sender id last; no colons inside. */
function fbField(v: string): string {
  return v.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64) || 'none';
}

export function trackingPlan(
  ctx: { base: string; key: Uint8Array },
  tx: {
    tenant_id: string;
    mail_type: string;
    tags: string[];
    options: { open_tracking?: boolean; click_tracking?: boolean; readonly tracking_links?: readonly string[] };
  },
): TrackingPlan {
  const marketing = tx.mail_type === 'marketing';
  const links = tx.options.tracking_links;
  return {
    ...(links?.length ? { links } : {}),
    base: ctx.base,
    key: ctx.key,
    open: tx.options.open_tracking === true,
    click: tx.options.click_tracking === true,
    unsubscribe: marketing,
    // campaign (the first tag) : mail type : tenant : sender
    feedbackId: `${fbField(tx.tags[0] ?? 'none')}:${marketing ? 'marketing' : 'transactional'}:${fbField(tx.tenant_id)}:postyard`,
  };
}

/** True when the message bytes differ per recipient because of tracking (no shared body then). */
export function perRecipient(plan: TrackingPlan | null | undefined): boolean {
  return !!plan && (plan.open || plan.click || plan.unsubscribe);
}

export interface TrackedParts {
  html?: string;
  headers: Record<string, string>;
  listUnsubscribe?: string;
  listUnsubscribeOneClick?: boolean;
}

/** URL -> its number in the link table; the last table's map is kept (a message's links come together). */
let lastRefs: { links: readonly string[]; map: Map<string, number> } | null = null;

function linkRefs(links: readonly string[] | undefined): Map<string, number> | null {
  if (!links?.length) return null;
  if (lastRefs?.links === links) return lastRefs.map;
  const map = new Map<string, number>();
  for (const [i, url] of links.entries()) if (url !== undefined && !map.has(url)) map.set(url, i);
  lastRefs = { links, map };
  return map;
}

/** The List-Unsubscribe value of one message: the https one-click URL and a mailto fallback. */
export function listUnsubscribe(plan: TrackingPlan, messageId: string, returnPathDomain: string): string {
  const t = signToken(plan.key, { kind: 'unsubscribe', messageId });
  return `<${plan.base}/u/${t}>, <mailto:unsubscribe+${t}@${returnPathDomain}>`;
}

/**
 * Applies the plan to one message's rendered parts: Feedback-ID always (replacing one the
 * content set); with `messageId` (null = the shared body of a transmission) the tracked html
 * and the List-Unsubscribe headers. Text parts are never changed.
 */
export function applyTracking<T extends { html?: string; headers?: Record<string, string> }>(
  plan: TrackingPlan | null | undefined,
  messageId: string | null,
  parts: T,
  returnPathDomain: string,
): T & TrackedParts {
  if (!plan) return parts as T & TrackedParts;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(parts.headers ?? {})) if (k.toLowerCase() !== 'feedback-id') headers[k] = v;
  headers['Feedback-ID'] = plan.feedbackId;
  const out: T & TrackedParts = { ...parts, headers };
  if (messageId === null) return out;
  if (parts.html !== undefined && (plan.open || plan.click)) {
    const refs = plan.click ? linkRefs(plan.links) : null;
    // One message key for all of the message's tokens (token.ts version 3).
    const sign = messageSigner(plan.key, messageId);
    out.html = rewriteHtml(parts.html, {
      clickUrl: plan.click
        ? (url, link) => {
            const ref = refs?.get(url);
            return `${plan.base}/c/${sign(ref === undefined ? { kind: 'click', link, url } : { kind: 'click', link, ref })}`;
          }
        : null,
      openUrl: plan.open ? `${plan.base}/o/${sign({ kind: 'open' })}` : null,
    });
  }
  if (plan.unsubscribe) {
    out.listUnsubscribe = listUnsubscribe(plan, messageId, returnPathDomain);
    out.listUnsubscribeOneClick = true;
  }
  return out;
}

/** For submitted (raw) messages: the header lines to put on top, each ending CRLF. */
export function rawHeaderLines(
  plan: TrackingPlan | null | undefined,
  messageId: string,
  head: string,
  returnPathDomain: string,
): string {
  if (!plan) return '';
  let add = '';
  if (!/^feedback-id:/im.test(head)) add += `Feedback-ID: ${plan.feedbackId}\r\n`;
  if (plan.unsubscribe && !/^list-unsubscribe:/im.test(head)) {
    add += `List-Unsubscribe: ${listUnsubscribe(plan, messageId, returnPathDomain)}\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n`;
  }
  return add;
}

/**
 * The message id of the placeholder tokens in a shared tracked body (delivery/render/
 * shared-body.ts): tokens of every message of a transmission have the same length, since the
 * message id is always 16 bytes, so each message's tokens are written over these.
 */
const PLACEHOLDER_MESSAGE_ID = 'ffffffff-ffff-4fff-bfff-ffffffffffff';
const TOKEN_IN_TEXT = /(?:\/[cou]\/|unsubscribe\+)([A-Za-z0-9_-]{24,})/g;
const KINDS = ['click', 'open', 'unsubscribe'] as const;

/** Placeholder token -> what it carries, so each message signs without verifying again. */
const specs = new BoundedCache<string, TrackingToken>(4096);
/**
 * A shared body's placeholder tokens (the array shared-body.ts keeps per transmission) -> the
 * TokenSet that signs them for each message, with the key it was checked with.
 */
const sets = new WeakMap<readonly string[], { key: Uint8Array; set: TokenSet; starts: number[] }>();

/**
 * True when two token keys hold the same bytes. A render thread gets the plan by structured clone
 * with every message, so its key is a new Uint8Array each time: comparing by identity rebuilt the
 * TokenSet for every message (~9 us of a tracked render). Not constant-time: both are
 * our own key, nothing a client sent.
 */
function sameKey(a: Uint8Array, b: Uint8Array): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function placeholderSpec(plan: TrackingPlan, token: string): TrackingToken | null {
  const hit = specs.get(token);
  if (hit) return hit;
  for (const kind of KINDS) {
    const t = verifyToken(plan.key, token, kind);
    if (!t) continue;
    if (t.messageId !== PLACEHOLDER_MESSAGE_ID) return null;
    specs.set(token, t);
    return t;
  }
  return null;
}

/**
 * applyTracking for the shared body of a tracked transmission: the placeholder message's tokens,
 * and `markers` (each placeholder token and how many times it was put in).
 */
export function sharedTrackedParts<T extends { html?: string; headers?: Record<string, string> }>(
  plan: TrackingPlan,
  parts: T,
  returnPathDomain: string,
): T & TrackedParts & { markers: Map<string, number> } {
  const out = applyTracking(plan, PLACEHOLDER_MESSAGE_ID, parts, returnPathDomain);
  const markers = new Map<string, number>();
  for (const text of [out.html ?? '', out.listUnsubscribe ?? '']) {
    for (const m of text.matchAll(TOKEN_IN_TEXT)) {
      const token = m[1] as string;
      // Only our placeholders: a link left untracked may have a token-like path of its own.
      if (placeholderSpec(plan, token)) markers.set(token, (markers.get(token) ?? 0) + 1);
    }
  }
  return { ...out, markers };
}

/** How many TokenSets messageTokens has laid out (tests: one per shared body and key, not per message). */
export const tokenSetsBuilt = { count: 0 };

/**
 * The message's own tokens in place of placeholder tokens of sharedTrackedParts, in the same
 * order, as one text (`text`, token n at `at[n]`, as long as placeholder n): all of them signed
 * together (token.ts TokenSet: one HMAC for the message, one AES call for its tags). Pass the same
 * array for every message of a transmission: what each placeholder carries is worked out once per
 * array (and key).
 */
export function messageTokens(
  plan: TrackingPlan,
  placeholders: readonly string[],
  messageId: string,
): { text: string; at: readonly number[] } {
  let hit = sets.get(placeholders);
  if (!hit || !sameKey(hit.key, plan.key)) {
    const list = placeholders.map((p) => {
      const spec = placeholderSpec(plan, p);
      if (!spec) throw new Error('not a placeholder token');
      return spec;
    });
    const set = new TokenSet(list);
    tokenSetsBuilt.count++;
    hit = { key: plan.key, set, starts: set.starts() };
    sets.set(placeholders, hit);
  }
  return { text: hit.set.signText(plan.key, messageIdBytes(messageId)), at: hit.starts };
}

/** The plan with the sending domain's verified tracking host name as its base, when it has one. */
export function withTrackingBase(plan: TrackingPlan | null, trackingBase: string | undefined): TrackingPlan | null {
  return plan && trackingBase && trackingBase !== plan.base ? { ...plan, base: trackingBase } : plan;
}
