/**
 * What the renderer does for tracking (docs/tracking.md): decided once per transmission on the
 * delivery worker (where the master key is) and handed to the render thread with the
 * transmission, as plain data.
 */
import { rewriteHtml } from './rewrite.ts';
import { signToken } from './token.ts';

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
    options: { open_tracking?: boolean; click_tracking?: boolean };
  },
): TrackingPlan {
  const marketing = tx.mail_type === 'marketing';
  return {
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
    out.html = rewriteHtml(parts.html, {
      clickUrl: plan.click
        ? (url, link) => `${plan.base}/c/${signToken(plan.key, { kind: 'click', messageId, link, url })}`
        : null,
      openUrl: plan.open ? `${plan.base}/o/${signToken(plan.key, { kind: 'open', messageId })}` : null,
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
