import { Webhook } from 'standardwebhooks';
import { WebhookVerificationFailed } from './errors.ts';
import type { PostyardEvent, WebhookPayload } from './types.ts';

/** Request headers as Node (`req.headers`), fetch (`Headers`) or a plain object gives them. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

function header(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  for (const [k, v] of Object.entries(record)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(' ') : v;
  }
  return undefined;
}

/**
 * Verifies a webhook request with the Standard Webhooks library and returns its parsed body.
 *
 * - `body` must be the raw request body exactly as received (a re-serialized JSON object will
 *   not verify).
 * - `secrets`: the webhook's `whsec_...` secret, or two during a rotation (the new and the old);
 *   the request verifies when any of them signed it.
 * - The timestamp must be within 5 minutes of now, so a captured request cannot be replayed later.
 *
 * Throws WebhookVerificationFailed otherwise: answer such a request with 401 and do nothing.
 */
export function verifyWebhook(
  body: string | Uint8Array,
  headers: HeadersLike,
  secrets: string | readonly string[],
): WebhookPayload {
  const list = (typeof secrets === 'string' ? [secrets] : [...secrets]).filter((s) => s !== '');
  if (list.length === 0) throw new TypeError('verifyWebhook: a whsec_... secret is required');
  const text = typeof body === 'string' ? body : new TextDecoder().decode(body);
  const signed: Record<string, string> = {};
  for (const name of SIGNATURE_HEADERS) {
    const v = header(headers, name);
    if (v === undefined || v === '') throw new WebhookVerificationFailed(`missing ${name} header`);
    signed[name] = v;
  }
  let last: unknown;
  for (const secret of list) {
    try {
      return new Webhook(secret).verify(text, signed) as WebhookPayload;
    } catch (err) {
      last = err;
    }
  }
  const reason = last instanceof Error ? last.message : 'no matching signature';
  throw new WebhookVerificationFailed(`webhook signature did not verify: ${reason}`, { cause: last });
}

/** The events of a verified body: the one event (single policy) or the batch's events (batch policy). */
export function webhookEvents(payload: WebhookPayload): PostyardEvent[] {
  return 'events' in payload && Array.isArray(payload.events) ? payload.events : [payload as PostyardEvent];
}
