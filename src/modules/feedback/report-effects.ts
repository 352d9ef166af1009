import type { MessagesTable } from '../../db/schema.ts';
import { nowIso } from '../../lib/clock.ts';
import type { NewEvent } from '../events/events.types.ts';
import { classifyBounce } from '../outcomes/bounce-rules.ts';
import { type AttemptRecord, bounceSuppression, eventFor, type Outcome } from '../outcomes/outcomes.ts';
import type { RecipientStatus } from './delivery-status.ts';

/**
 * What one report does to one message, as data for report-batch.ts to have written
 * (src/modules/outcomes/report-outcomes.ts): the event, the suppression, the classification. The
 * same rules as a synchronous outcome (src/modules/outcomes/: outcomes.ts eventFor and
 * bounceSuppression, bounce-rules.ts), marked `async: true`.
 */

/** A message as the batch loads it: its row with its transmission's mail type and tags. */
export type Row = MessagesTable & { mail_type: string; tags: string };

export function outcomeBase(row: Row) {
  const { mail_type, tags, ...msg } = row;
  return { msg: msg as MessagesTable, mailType: mail_type, tags: JSON.parse(tags) as string[] };
}

export function bounceOf(row: Row, status: RecipientStatus) {
  // A failure without any code is still the remote's final word: read it as permanent.
  const bounce = classifyBounce({
    ...(status.smtpCode !== null ? { code: status.smtpCode } : status.enhancedCode ? {} : { code: 550 }),
    ...(status.enhancedCode ? { enhancedCode: status.enhancedCode } : {}),
    text: status.diagnostic,
  });
  const diagnostic = status.diagnostic.replaceAll('\u0000', '').slice(0, 1000);
  const outcome: Outcome & { kind: 'bounced' } = {
    ...outcomeBase(row),
    kind: 'bounced',
    attempt: reportAttempt(status, diagnostic),
    bounce,
    diagnostic,
  };
  const event = eventFor(outcome, row.attempt_count);
  event.data = { ...event.data, async: true, rule: bounce.rule, remote_mta: status.remoteMta };
  // The same automatic suppression a synchronous bounce gives.
  return { outcome, event, suppress: bounceSuppression(outcome) };
}

export function delayedEvent(row: Row, status: RecipientStatus): NewEvent {
  const diagnostic = status.diagnostic.replaceAll('\u0000', '').slice(0, 1000);
  const event = eventFor(
    {
      ...outcomeBase(row),
      kind: 'deferred',
      attempt: reportAttempt(status, diagnostic),
      nextAttemptAtMs: 0,
      diagnostic,
    },
    row.attempt_count,
  );
  // The remote MTA retries on its own schedule, which the report does not give.
  event.data = { ...event.data, next_attempt_at: null, async: true, remote_mta: status.remoteMta };
  return event;
}

export function complaintEvent(row: Row, feedbackType: string, userAgent: string | null): NewEvent {
  const base = outcomeBase(row);
  return {
    tenantId: row.tenant_id,
    type: 'message.complained',
    transmissionId: row.transmission_id,
    messageId: row.id,
    recipient: row.recipient,
    mailType: base.mailType,
    tags: base.tags,
    metadata: row.metadata || '{}',
    role: row.recipient_role ?? null,
    data: { feedback_type: feedbackType, user_agent: userAgent, async: true },
  };
}

/** The recipient entry about our recipient; with one failed/delayed entry only, that one. */
export function pickStatus(entries: RecipientStatus[], recipient: string): RecipientStatus | null {
  const relevant = entries.filter((e) => e.action !== 'other');
  const exact = relevant.find((e) => e.recipient?.toLowerCase() === recipient.toLowerCase());
  if (exact) return exact;
  return relevant.length === 1 ? (relevant[0] ?? null) : null;
}

/** The report as an attempt record, for the event's smtp_code / enhanced_code (not stored as an attempt). */
function reportAttempt(status: RecipientStatus, diagnostic: string): AttemptRecord {
  const at = nowIso();
  return {
    startedAt: at,
    finishedAt: at,
    mxHost: status.remoteMta,
    address: null,
    tls: false,
    smtpCode: status.smtpCode,
    enhancedCode: status.enhancedCode,
    response: diagnostic,
    transcript: [],
  };
}
